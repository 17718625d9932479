package diskphase

// This file holds the row collectors of a unit: columns gathers rows
// column-wise, and partitioner splits them by the reduce partition
// that owns their key group.

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// columns collects rows column-wise in plain Go slices, mapping batch
// columns by name.
type columns struct {
	names []string
	cols  [][]int64
	idx   []int
	last  *arrow.Schema
}

func newColumns(names []string) *columns {
	return &columns{names: names, cols: make([][]int64, len(names))}
}

// rows is the rows collected.
func (c *columns) rows() int {
	if len(c.cols) == 0 {
		return 0
	}
	return len(c.cols[0])
}

// reset empties c and keeps its memory for the next rows.
func (c *columns) reset() {
	for i := range c.cols {
		c.cols[i] = c.cols[i][:0]
	}
}

func (c *columns) add(b arrow.RecordBatch) error {
	if s := b.Schema(); s != c.last {
		if s.NumFields() != len(c.names) {
			return fmt.Errorf("batch has columns %v, want %v", fieldNames(s), c.names)
		}
		c.idx = make([]int, len(c.names))
		for i, n := range c.names {
			fi := s.FieldIndices(n)
			if len(fi) != 1 {
				return fmt.Errorf("batch has columns %v, want %v", fieldNames(s), c.names)
			}
			c.idx[i] = fi[0]
		}
		c.last = s
	}
	for i, j := range c.idx {
		a, ok := b.Column(j).(*array.Int64)
		if !ok || a.NullN() > 0 {
			return fmt.Errorf("column %q is not a null-free int64 column", c.names[i])
		}
		c.cols[i] = append(c.cols[i], a.Int64Values()...)
	}
	return nil
}

// partitioner splits rows by the reduce partition that owns their key's
// key group.
type partitioner struct {
	parts       []*columns
	keyIdx      int
	parallelism int
	owner       []int32
}

func newPartitioner(names []string, nparts, keyIdx, parallelism int) *partitioner {
	p := &partitioner{keyIdx: keyIdx, parallelism: parallelism}
	for range nparts {
		p.parts = append(p.parts, newColumns(names))
	}
	return p
}

// rows is the rows held over all partitions.
func (p *partitioner) rows() int {
	n := 0
	for _, c := range p.parts {
		n += c.rows()
	}
	return n
}

func (p *partitioner) add(b arrow.RecordBatch) error {
	if len(p.parts) == 1 {
		return p.parts[0].add(b)
	}
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	ncols := int(b.NumCols())
	if ncols != len(p.parts[0].names) {
		return fmt.Errorf("batch has %d columns, want %v", ncols, p.parts[0].names)
	}
	vals := make([][]int64, ncols)
	for c := range vals {
		a, ok := b.Column(c).(*array.Int64)
		if !ok || a.NullN() > 0 {
			return fmt.Errorf("column %q is not a null-free int64 column", b.ColumnName(c))
		}
		vals[c] = a.Int64Values()
	}
	p.owner = slices.Grow(p.owner[:0], n)[:n]
	for i, k := range vals[p.keyIdx] {
		p.owner[i] = int32(keygroup.Owner(keygroup.Of(k), p.parallelism))
	}
	for c, col := range vals {
		for i, v := range col {
			dst := p.parts[p.owner[i]]
			dst.cols[c] = append(dst.cols[c], v)
		}
	}
	return nil
}
