package operator

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// filterAtLeast keeps the rows whose int64 column is at least min.
type filterAtLeast struct {
	schema *arrow.Schema
	col    int
	min    int64
	alloc  memory.Allocator
	sel    []int32 // selection scratch, reused across batches
}

// NewFilterAtLeast returns a stateless operator that keeps the rows whose
// int64 column is >= min (rows where it is null are dropped). The output
// schema is the input schema.
func NewFilterAtLeast(in *arrow.Schema, column string, min int64) (Operator, error) {
	idx, err := Int64ColumnIndex(in, column)
	if err != nil {
		return nil, fmt.Errorf("filter %s >= %d: %w", column, min, err)
	}
	return &filterAtLeast{schema: in, col: idx, min: min, alloc: memory.DefaultAllocator}, nil
}

func (f *filterAtLeast) OutputSchema() *arrow.Schema { return f.schema }

func (f *filterAtLeast) Open(ctx Context) error {
	f.alloc = helpAlloc(ctx.Alloc)
	return nil
}

func (f *filterAtLeast) Process(port int, batch arrow.RecordBatch, out Emitter) error {
	if port != 0 {
		return fmt.Errorf("filter: input port %d does not exist", port)
	}
	n := int(batch.NumRows())
	if n == 0 {
		return nil
	}
	col, err := helpInt64Col(batch, f.col)
	if err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	sel := f.selectRows(col)
	switch k := len(sel); {
	case k == 0:
		return nil
	case k == n:
		// The emitter borrows, and so do we: hand the input on untouched.
		return out.Emit(batch)
	case int(sel[k-1]-sel[0]) == k-1:
		// One contiguous run: a zero-copy slice shares the input buffers.
		s := batch.NewSlice(int64(sel[0]), int64(sel[k-1])+1)
		defer s.Release()
		return out.Emit(s)
	}
	res, err := filtTake(f.alloc, batch, sel)
	if err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	defer res.Release()
	return out.Emit(res)
}

// selectRows returns the indexes of the rows that pass, in f.sel.
func (f *filterAtLeast) selectRows(col *array.Int64) []int32 {
	vals := col.Int64Values()
	if cap(f.sel) < len(vals) {
		f.sel = make([]int32, len(vals))
	}
	sel := f.sel[:len(vals)]
	// Branch-free: always write the index, advance only when the row passes.
	// Selectivity is data dependent, so a branch would mispredict.
	k, min := 0, f.min
	for i, v := range vals {
		sel[k] = int32(i)
		k += filtB2I(v >= min)
	}
	sel = sel[:k]
	if col.NullN() > 0 {
		j := 0
		for _, i := range sel {
			if col.IsValid(int(i)) {
				sel[j] = i
				j++
			}
		}
		sel = sel[:j]
	}
	return sel
}

// filtB2I is compiled to a SETcc, not a branch.
func filtB2I(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}

// filtTake builds a batch holding the rows sel of batch.
func filtTake(alloc memory.Allocator, batch arrow.RecordBatch, sel []int32) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, batch.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	var idx arrow.Array // built lazily for the generic path
	defer func() {
		if idx != nil {
			idx.Release()
		}
	}()
	for i, c := range batch.Columns() {
		if c64, ok := c.(*array.Int64); ok {
			cols[i] = filtTakeInt64(alloc, c64, sel)
			continue
		}
		// Other types do not occur in the built-in jobs; arrow's take kernel
		// covers them.
		if idx == nil {
			b := array.NewInt32Builder(alloc)
			b.AppendValues(sel, nil)
			idx = b.NewArray()
			b.Release()
		}
		ctx := compute.WithAllocator(context.Background(), alloc)
		taken, err := compute.TakeArray(ctx, c, idx)
		if err != nil {
			release()
			return nil, fmt.Errorf("taking column %q: %w", batch.ColumnName(i), err)
		}
		cols[i] = taken
	}
	return NewBatchOwning(batch.Schema(), len(sel), cols...), nil
}

// filtTakeInt64 gathers the values sel of c, validity included.
func filtTakeInt64(alloc memory.Allocator, c *array.Int64, sel []int32) arrow.Array {
	src := c.Int64Values()
	arr, dst := AllocInt64(alloc, len(sel))
	for j, i := range sel {
		dst[j] = src[i]
	}
	if c.NullN() == 0 {
		return arr
	}
	defer arr.Release()
	valid := memory.NewResizableBuffer(alloc)
	defer valid.Release()
	valid.Resize(int(bitutil.BytesForBits(int64(len(sel)))))
	bits := valid.Bytes()
	clear(bits)
	nulls := 0
	for j, i := range sel {
		if c.IsValid(int(i)) {
			bitutil.SetBit(bits, j)
		} else {
			nulls++
		}
	}
	data := array.NewData(arrow.PrimitiveTypes.Int64, len(sel),
		[]*memory.Buffer{valid, arr.Data().Buffers()[1]}, nil, nulls, 0)
	defer data.Release()
	return array.NewInt64Data(data)
}

func (f *filterAtLeast) AdvanceWatermark(int64, Emitter) error { return nil }
func (f *filterAtLeast) Flush(Emitter) error                   { return nil }
func (f *filterAtLeast) Close() error {
	f.sel = nil
	return nil
}
