package operator_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

var tsSrcSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func tsOpen(t *testing.T, op operator.Operator, mem memory.Allocator) {
	t.Helper()
	if err := op.Open(operator.Context{Alloc: mem, Parallelism: 1, KeyGroups: keygroup.All}); err != nil {
		t.Fatal(err)
	}
}

func ftNew(t *testing.T, mem memory.Allocator) operator.Operator {
	t.Helper()
	f, err := operator.NewFilterAtLeast(tsSrcSchema, "value", 0)
	if err != nil {
		t.Fatal(err)
	}
	tsOpen(t, f, mem)
	return f
}

// ftRun runs one batch of rows through a value>=0 filter.
func ftRun(t *testing.T, rows [][]int64) (*optest.Collector, arrow.RecordBatch) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	f := ftNew(t, mem)
	defer f.Close()
	in := optest.Batch(mem, tsSrcSchema, rows)
	t.Cleanup(in.Release)
	out := &optest.Collector{Schema: tsSrcSchema, Keep: true}
	t.Cleanup(out.Release)
	if err := f.Process(0, in, out); err != nil {
		t.Fatal(err)
	}
	return out, in
}

func TestFilterKeepsRowsAtLeastMin(t *testing.T) {
	rows := [][]int64{
		{1, 10, 5, 100},
		{2, 11, -1, 101},
		{3, 12, 0, 102},
		{4, 13, -7, 103},
		{5, 14, 9, 104},
		{6, 15, -9223372036854775808, 105},
	}
	out, _ := ftRun(t, rows)
	want := [][]int64{{1, 10, 5, 100}, {3, 12, 0, 102}, {5, 14, 9, 104}}
	if !slices.EqualFunc(out.Rows, want, slices.Equal) {
		t.Fatalf("got %v, want %v", out.Rows, want)
	}
	if out.Emits != 1 {
		t.Fatalf("%d emits, want 1", out.Emits)
	}
}

func TestFilterNoRowPassesEmitsNothing(t *testing.T) {
	out, _ := ftRun(t, [][]int64{{1, 1, -1, 1}, {2, 2, -2, 2}})
	if out.Emits != 0 {
		t.Fatalf("%d emits for zero passing rows, want 0", out.Emits)
	}
}

func TestFilterEmptyBatchEmitsNothing(t *testing.T) {
	out, _ := ftRun(t, nil)
	if out.Emits != 0 {
		t.Fatalf("%d emits for an empty batch, want 0", out.Emits)
	}
}

func TestFilterAllPassEmitsInput(t *testing.T) {
	out, in := ftRun(t, [][]int64{{1, 1, 0, 1}, {2, 2, 3, 2}})
	if out.Emits != 1 || out.Batches[0] != in {
		t.Fatalf("all rows pass: want the input batch itself emitted once, got %d emits", out.Emits)
	}
}

func TestFilterContiguousRunIsZeroCopy(t *testing.T) {
	out, in := ftRun(t, [][]int64{{1, 1, -1, 1}, {2, 2, 1, 2}, {3, 3, 2, 3}, {4, 4, -1, 4}})
	want := [][]int64{{2, 2, 1, 2}, {3, 3, 2, 3}}
	if !slices.EqualFunc(out.Rows, want, slices.Equal) {
		t.Fatalf("got %v, want %v", out.Rows, want)
	}
	got := out.Batches[0].Column(0).Data().Buffers()[1]
	if got != in.Column(0).Data().Buffers()[1] {
		t.Fatalf("a contiguous run should share the input's buffers")
	}
}

func TestFilterNulls(t *testing.T) {
	mem := checkedMem(t)
	f := ftNew(t, mem)
	defer f.Close()
	b := array.NewRecordBuilder(mem, tsSrcSchema)
	defer b.Release()
	// value null in row 1 (dropped), id null in row 2 (kept, stays null).
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, []bool{true, true, false, true})
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	b.Field(2).(*array.Int64Builder).AppendValues([]int64{5, 0, 6, -1}, []bool{true, false, true, true})
	b.Field(3).(*array.Int64Builder).AppendValues([]int64{1, 2, 3, 4}, nil)
	in := b.NewRecordBatch()
	defer in.Release()
	out := &optest.Collector{Keep: true}
	defer out.Release()
	if err := f.Process(0, in, out); err != nil {
		t.Fatal(err)
	}
	got := out.Batches[0]
	if got.NumRows() != 2 {
		t.Fatalf("%d rows, want 2", got.NumRows())
	}
	id := got.Column(0).(*array.Int64)
	if !id.IsValid(0) || id.Value(0) != 1 || id.IsValid(1) || id.NullN() != 1 {
		t.Fatalf("id column %v, want [1 (null)]", id)
	}
	if v := got.Column(2).(*array.Int64).Int64Values(); !slices.Equal(v, []int64{5, 6}) {
		t.Fatalf("values %v, want [5 6]", v)
	}
}

func TestFilterOtherColumnTypes(t *testing.T) {
	mem := checkedMem(t)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	f, err := operator.NewFilterAtLeast(s, "value", 10)
	if err != nil {
		t.Fatal(err)
	}
	tsOpen(t, f, mem)
	defer f.Close()
	b := array.NewRecordBuilder(mem, s)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "c", "d"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{10, 1, 11, 12}, nil)
	in := b.NewRecordBatch()
	defer in.Release()
	var names []string
	err = f.Process(0, in, operator.EmitFunc(func(r arrow.RecordBatch) error {
		c := r.Column(0).(*array.String)
		for i := 0; i < c.Len(); i++ {
			names = append(names, c.Value(i))
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"a", "c", "d"}) {
		t.Fatalf("names %v, want [a c d]", names)
	}
}

func TestFilterColumnErrors(t *testing.T) {
	mixed := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	for _, tc := range []struct {
		schema *arrow.Schema
		col    string
		want   []string
	}{
		{tsSrcSchema, "nope", []string{`"nope"`, "not found", "id int64"}},
		{mixed, "value", []string{`"value"`, "float64", "want int64", "key int64"}},
	} {
		_, err := operator.NewFilterAtLeast(tc.schema, tc.col, 0)
		wantMentions(t, fmt.Sprintf("column %q", tc.col), err, tc.want)
	}
}

func TestFilterRejectsOtherPorts(t *testing.T) {
	mem := checkedMem(t)
	f := ftNew(t, mem)
	defer f.Close()
	in := optest.Batch(mem, tsSrcSchema, [][]int64{{1, 1, 1, 1}})
	defer in.Release()
	if err := f.Process(1, in, &optest.Collector{}); err == nil {
		t.Fatal("port 1 accepted")
	}
}
