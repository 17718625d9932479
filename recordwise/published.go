package recordwise

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// publishedRows are the rows a transactional sink already made visible in
// epochs the restored recovery point does not cover. That happens only
// after a fallback: the newest complete point was committed (its epochs
// published) and then proved unreadable, so the run resumed from an older
// one and replays input whose output is already visible. The sink tasks
// drop replayed rows whose write key and _version are among these, so no
// row is published twice; a correct run never emits two rows with the same
// write key and _version, so this drops replays only. (A replay may give
// such a row other values than the visible one, as the changelog of a count
// can when the channels interleave differently; the visible row stays. The
// row with the greatest _version of a key reflects the same input either
// way.)
type publishedRows struct {
	cols []string // the write-key columns, then _version
	seen map[string]struct{}
	key  []byte
}

// newPublishedRows indexes rows, in the layout's column order.
func newPublishedRows(layout sink.Layout, rows [][]int64) (*publishedRows, error) {
	names := sink.ColumnNames(layout.Schema)
	p := &publishedRows{cols: append(slices.Clone(layout.WriteKey), sink.VersionColumn), seen: make(map[string]struct{}, len(rows))}
	idx := make([]int, len(p.cols))
	for i, c := range p.cols {
		if idx[i] = slices.Index(names, c); idx[i] < 0 {
			return nil, fmt.Errorf("output layout has no column %q", c)
		}
	}
	vals := make([]int64, len(idx))
	for _, r := range rows {
		for i, j := range idx {
			vals[i] = r[j]
		}
		p.seen[string(p.encode(vals))] = struct{}{}
	}
	return p, nil
}

func (p *publishedRows) encode(vals []int64) []byte {
	p.key = p.key[:0]
	for _, v := range vals {
		p.key = binary.LittleEndian.AppendUint64(p.key, uint64(v))
	}
	return p.key
}

// filter returns b without the rows already published. When it drops none
// it returns b itself (still borrowed, owned false); otherwise a new batch
// the caller must release. It is not safe for concurrent use: each sink
// task holds its own copy (see clone).
func (p *publishedRows) filter(b arrow.RecordBatch, alloc memory.Allocator) (out arrow.RecordBatch, owned bool, err error) {
	n := int(b.NumRows())
	src := make([][]int64, len(p.cols))
	for i, c := range p.cols {
		j := b.Schema().FieldIndices(c)
		if len(j) != 1 {
			return nil, false, fmt.Errorf("sink batch has no column %q", c)
		}
		a, ok := b.Column(j[0]).(*array.Int64)
		if !ok {
			return nil, false, fmt.Errorf("sink batch column %q is %s, want int64", c, b.Column(j[0]).DataType())
		}
		src[i] = a.Int64Values()
	}
	vals := make([]int64, len(p.cols))
	var keep []int
	for r := 0; r < n; r++ {
		for i := range src {
			vals[i] = src[i][r]
		}
		if _, ok := p.seen[string(p.encode(vals))]; ok {
			if keep == nil {
				keep = make([]int, 0, n)
				for k := 0; k < r; k++ {
					keep = append(keep, k)
				}
			}
			continue
		}
		if keep != nil {
			keep = append(keep, r)
		}
	}
	if keep == nil {
		return b, false, nil
	}
	cols := make([]arrow.Array, b.NumCols())
	for c := range cols {
		in, ok := b.Column(c).(*array.Int64)
		if !ok {
			for _, a := range cols[:c] {
				a.Release()
			}
			return nil, false, fmt.Errorf("sink batch column %q is %s, want int64", b.ColumnName(c), b.Column(c).DataType())
		}
		a, v := operator.AllocInt64(alloc, len(keep))
		iv := in.Int64Values()
		for k, r := range keep {
			v[k] = iv[r]
		}
		cols[c] = a
	}
	return operator.NewBatchOwning(b.Schema(), len(keep), cols...), true, nil
}

// clone shares the index (read only) with a scratch key of its own.
func (p *publishedRows) clone() *publishedRows {
	if p == nil {
		return nil
	}
	return &publishedRows{cols: p.cols, seen: p.seen}
}
