package operator

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// AllocInt64 allocates an int64 array of n non-null values from alloc and
// returns it with its value slice. The caller fills values before the array
// is shared with anyone (it is immutable from then on) and releases the array.
// Writing straight into the Arrow buffer avoids the builder's per-value
// overhead and a second copy.
func AllocInt64(alloc memory.Allocator, n int) (*array.Int64, []int64) {
	return helpAllocInt64(alloc, n, 0)
}

// helpAllocInt64 is AllocInt64 with spare writable values past the array's
// end, for loops that write one slot ahead without a bounds branch.
func helpAllocInt64(alloc memory.Allocator, n, spare int) (*array.Int64, []int64) {
	buf := memory.NewResizableBuffer(alloc)
	buf.Resize((n + spare) * arrow.Int64SizeBytes)
	vals := arrow.Int64Traits.CastFromBytes(buf.Bytes())
	data := array.NewData(arrow.PrimitiveTypes.Int64, n, []*memory.Buffer{nil, buf}, nil, 0, 0)
	arr := array.NewInt64Data(data)
	data.Release()
	buf.Release()
	return arr, vals
}

// NewBatchOwning builds a batch of n rows from cols and takes over the
// caller's references to cols: it releases them once the batch holds its own.
func NewBatchOwning(schema *arrow.Schema, n int, cols ...arrow.Array) arrow.RecordBatch {
	b := array.NewRecordBatch(schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return b
}

// Int64ColumnIndex returns the index of the int64 column called name, or an
// error naming the column and the schema when it is missing or has another
// type.
func Int64ColumnIndex(s *arrow.Schema, name string) (int, error) {
	idx := s.FieldIndices(name)
	switch {
	case len(idx) == 0:
		return -1, fmt.Errorf("column %q not found in schema %s", name, helpSchemaString(s))
	case len(idx) > 1:
		return -1, fmt.Errorf("column %q is ambiguous in schema %s", name, helpSchemaString(s))
	}
	if t := s.Field(idx[0]).Type; t.ID() != arrow.INT64 {
		return -1, fmt.Errorf("column %q has type %s, want int64, in schema %s", name, t, helpSchemaString(s))
	}
	return idx[0], nil
}

// helpSchemaString renders a schema on one line, e.g. (id int64, key int64).
func helpSchemaString(s *arrow.Schema) string {
	if s == nil {
		return "(nil schema)"
	}
	out := "("
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += f.Name + " " + f.Type.String()
	}
	return out + ")"
}

// helpAlloc is the allocator to use before Open provided one.
func helpAlloc(a memory.Allocator) memory.Allocator {
	if a == nil {
		return memory.DefaultAllocator
	}
	return a
}

// helpInt64Col returns column idx of batch as int64, or an error when the
// batch does not have the schema the operator was built for.
func helpInt64Col(batch arrow.RecordBatch, idx int) (*array.Int64, error) {
	if idx >= int(batch.NumCols()) {
		return nil, fmt.Errorf("batch has %d columns, column %d expected: schema %s", batch.NumCols(), idx, helpSchemaString(batch.Schema()))
	}
	c, ok := batch.Column(idx).(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("column %q is %s, want int64", batch.ColumnName(idx), batch.Column(idx).DataType())
	}
	return c, nil
}
