package operator_test

import (
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

func ptNew(t *testing.T, mem memory.Allocator, exprs ...operator.NamedExpr) operator.Operator {
	t.Helper()
	p, err := operator.NewProject(tsSrcSchema, exprs)
	if err != nil {
		t.Fatal(err)
	}
	tsOpen(t, p, mem)
	return p
}

func TestProjectColModConst(t *testing.T) {
	mem := checkedMem(t)
	p := ptNew(t, mem,
		operator.NamedExpr{Name: "k", Expr: operator.Col("key")},
		operator.NamedExpr{Name: "m16", Expr: operator.ModConst("key", 16)},
		operator.NamedExpr{Name: "m10", Expr: operator.ModConst("key", 10)},
		operator.NamedExpr{Name: "m1", Expr: operator.ModConst("key", 1)},
		operator.NamedExpr{Name: "c", Expr: operator.Const(7)},
	)
	defer p.Close()
	want := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "m16", Type: arrow.PrimitiveTypes.Int64},
		{Name: "m10", Type: arrow.PrimitiveTypes.Int64},
		{Name: "m1", Type: arrow.PrimitiveTypes.Int64},
		{Name: "c", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	if !p.OutputSchema().Equal(want) {
		t.Fatalf("schema %s, want %s", p.OutputSchema(), want)
	}
	keys := []int64{0, 1, 15, 16, 17, -1, -15, -16, -17, -10, -11, math.MinInt64, math.MaxInt64}
	rows := make([][]int64, len(keys))
	for i, k := range keys {
		rows[i] = []int64{int64(i), k, 0, 0}
	}
	in := optest.Batch(mem, tsSrcSchema, rows)
	defer in.Release()
	out := &optest.Collector{Schema: want, Keep: true}
	defer out.Release()
	if err := p.Process(0, in, out); err != nil {
		t.Fatal(err)
	}
	floorMod := func(v, m int64) int64 { // the obvious reference
		r := v % m
		if r < 0 {
			r += m
		}
		return r
	}
	for i, k := range keys {
		got := out.Rows[i]
		exp := []int64{k, floorMod(k, 16), floorMod(k, 10), 0, 7}
		if !slices.Equal(got, exp) {
			t.Errorf("key %d: got %v, want %v", k, got, exp)
		}
		if got[1] < 0 || got[1] >= 16 || got[2] < 0 || got[2] >= 10 {
			t.Errorf("key %d: modulo out of range: %v", k, got)
		}
	}
	// Spot values that a truncating % would get wrong.
	if out.Rows[5][1] != 15 || out.Rows[5][2] != 9 || out.Rows[9][2] != 0 || out.Rows[10][2] != 9 {
		t.Errorf("negative keys: got %v %v %v", out.Rows[5], out.Rows[9], out.Rows[10])
	}
	if out.Batches[0].Column(0) != in.Column(1) {
		t.Errorf("Col should pass the input array through, not copy it")
	}
}

func TestProjectConstAcrossBatchSizes(t *testing.T) {
	mem := checkedMem(t)
	p := ptNew(t, mem,
		operator.NamedExpr{Name: "id", Expr: operator.Col("id")},
		operator.NamedExpr{Name: "_version", Expr: operator.Const(-3)},
	)
	defer p.Close()
	out := &optest.Collector{Keep: true}
	defer out.Release()
	for _, n := range []int{3, 1, 10, 0, 4} {
		rows := make([][]int64, n)
		for i := range rows {
			rows[i] = []int64{int64(i), 0, 0, 0}
		}
		in := optest.Batch(mem, tsSrcSchema, rows)
		err := p.Process(0, in, out)
		in.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if out.Emits != 4 {
		t.Fatalf("%d emits, want 4 (an empty batch emits nothing)", out.Emits)
	}
	if len(out.Rows) != 18 {
		t.Fatalf("%d rows, want 18", len(out.Rows))
	}
	for _, r := range out.Rows {
		if r[1] != -3 {
			t.Fatalf("row %v: constant column is not -3", r)
		}
	}
}

func TestProjectModConstNulls(t *testing.T) {
	mem := checkedMem(t)
	p := ptNew(t, mem, operator.NamedExpr{Name: "b", Expr: operator.ModConst("key", 3)})
	defer p.Close()
	b := array.NewRecordBuilder(mem, tsSrcSchema)
	defer b.Release()
	for c := 0; c < 4; c++ {
		var valid []bool
		if c == 1 {
			valid = []bool{true, false, true}
		}
		b.Field(c).(*array.Int64Builder).AppendValues([]int64{-4, 5, 7}, valid)
	}
	full := b.NewRecordBatch()
	defer full.Release()
	in := full.NewSlice(1, 3) // an offset input, too
	defer in.Release()
	out := &optest.Collector{Keep: true}
	defer out.Release()
	if err := p.Process(0, in, out); err != nil {
		t.Fatal(err)
	}
	col := out.Batches[0].Column(0).(*array.Int64)
	if col.Len() != 2 || col.IsValid(0) || !col.IsValid(1) || col.Value(1) != 1 {
		t.Fatalf("got %v, want [(null) 1]", col)
	}
}

func TestProjectErrors(t *testing.T) {
	floatSchema := arrow.NewSchema([]arrow.Field{{Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
		exprs  []operator.NamedExpr
		want   []string
	}{
		{"missing column", tsSrcSchema, []operator.NamedExpr{{Name: "x", Expr: operator.Col("nope")}}, []string{`"nope"`, "id int64"}},
		{"mod of missing", tsSrcSchema, []operator.NamedExpr{{Name: "x", Expr: operator.ModConst("nope", 2)}}, []string{`"nope"`, "not found"}},
		{"mod of float", floatSchema, []operator.NamedExpr{{Name: "x", Expr: operator.ModConst("f", 2)}}, []string{`"f"`, "float64", "f float64"}},
		{"zero modulus", tsSrcSchema, []operator.NamedExpr{{Name: "x", Expr: operator.ModConst("key", 0)}}, []string{"positive"}},
		{"repeated name", tsSrcSchema, []operator.NamedExpr{{Name: "x", Expr: operator.Const(1)}, {Name: "x", Expr: operator.Const(2)}}, []string{`"x"`}},
		{"no columns", tsSrcSchema, nil, []string{"no output columns"}},
		{"nil expr", tsSrcSchema, []operator.NamedExpr{{Name: "x"}}, []string{`"x"`}},
	} {
		_, err := operator.NewProject(tc.schema, tc.exprs)
		wantMentions(t, tc.name, err, tc.want)
	}
}

// TestProjectColPassesOtherTypes checks that Col passes any type through.
func TestProjectColPassesOtherTypes(t *testing.T) {
	mem := checkedMem(t)
	s := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	p, err := operator.NewProject(s, []operator.NamedExpr{{Name: "n", Expr: operator.Col("name")}})
	if err != nil {
		t.Fatal(err)
	}
	tsOpen(t, p, mem)
	defer p.Close()
	if f := p.OutputSchema().Field(0); f.Type.ID() != arrow.STRING || !f.Nullable {
		t.Fatalf("field %v, want nullable utf8", f)
	}
}
