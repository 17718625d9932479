package source

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// cols is a batch under construction: four int64 columns written straight
// into allocator memory. Sources fill the slices in place instead of going
// through a builder, which is what makes generation cheap (no per-value
// append, no null bitmap).
type cols struct {
	bufs [4]*memory.Buffer
	n    int
	// id, key, value and ts alias the buffers' memory; each has room for the
	// capacity requested from newCols.
	id, key, value, ts []int64
}

// newCols allocates room for n rows from alloc. The four columns are
// 64-byte-aligned slices of one allocation: one call to the allocator per
// batch instead of four matters at tens of millions of records per second
// (with Go's allocator a 4096-row column is a "large" object, and every
// large allocation takes the heap lock). The price is that a consumer
// keeping one column alive keeps the whole batch's memory alive, which is
// harmless for batches that flow through and are released.
func newCols(alloc memory.Allocator, n int) *cols {
	c := &cols{n: n}
	stride := (n*arrow.Int64SizeBytes + 63) &^ 63
	parent := memory.NewResizableBuffer(alloc)
	parent.Resize(4 * stride)
	var s [4][]int64
	for i := range c.bufs {
		b := memory.SliceBuffer(parent, i*stride, n*arrow.Int64SizeBytes)
		c.bufs[i] = b
		s[i] = arrow.Int64Traits.CastFromBytes(b.Bytes())[:n:n]
	}
	parent.Release()
	c.id, c.key, c.value, c.ts = s[0], s[1], s[2], s[3]
	return c
}

// finish turns the filled columns into a record batch and hands the memory
// to it; c must not be used afterwards.
func (c *cols) finish() arrow.RecordBatch {
	n := c.n
	var arrs [4]arrow.Array
	for i, b := range c.bufs {
		d := array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, b}, nil, 0, 0)
		arrs[i] = array.NewInt64Data(d)
		d.Release()
		b.Release()
	}
	rec := array.NewRecordBatch(Schema, arrs[:], int64(n))
	for _, a := range arrs {
		a.Release()
	}
	*c = cols{}
	return rec
}

// release frees the memory of a batch that will not be finished (an error
// part-way through filling it).
func (c *cols) release() {
	for _, b := range c.bufs {
		if b != nil {
			b.Release()
		}
	}
	*c = cols{}
}
