package optest_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func TestBatchRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := [][]int64{{1, -2}, {3, 4}}
	b := optest.Batch(mem, schema, rows)
	defer b.Release()
	if got := optest.Rows(b); !slices.EqualFunc(got, rows, slices.Equal) {
		t.Fatalf("got %v, want %v", got, rows)
	}
	c := &optest.Collector{Schema: schema, Keep: true}
	if err := c.Emit(b); err != nil {
		t.Fatal(err)
	}
	c.Release()
	other := optest.Batch(mem, arrow.NewSchema(nil, nil), nil)
	defer other.Release()
	if err := c.Emit(other); err == nil {
		t.Fatal("collector accepted a batch of another schema")
	}
}

// recorder is a TB whose Fatalf ends the goroutine, as testing's does.
type recorder struct{ msg string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// forgetful wraps the keyed aggregation but restores nothing, so the check
// must fail for any cut with state before it.
type forgetful struct{ operator.Stateful }

func (forgetful) Restore([]operator.KeyGroupState) error { return nil }

func TestCheckSnapshotCatchesLostState(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := optest.Case{
		New: func() (operator.Stateful, error) {
			op, err := operator.NewKeyedAgg(schema, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"})
			return forgetful{op}, err
		},
		Inputs:     []*arrow.Schema{schema},
		KeyColumns: []string{"key"},
		Steps:      []optest.Step{optest.In(0, []int64{1, 10}, []int64{2, 5}), optest.WM(3), optest.In(0, []int64{1, 1})},
		Cut:        2,
		Restore:    2,
		Alloc:      mem,
	}
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		optest.CheckSnapshot(r, c)
	}()
	<-done
	if !strings.Contains(r.msg, "differs") {
		t.Fatalf("lost state not detected; message %q", r.msg)
	}

	// The real operator passes the same case.
	c.New = func() (operator.Stateful, error) {
		return operator.NewKeyedAgg(schema, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"})
	}
	res := optest.CheckSnapshot(t, c)
	want := [][]int64{{1, 2, 11, 2}}
	if !slices.EqualFunc(res.After, want, slices.Equal) {
		t.Fatalf("rows after the cut %v, want %v", res.After, want)
	}
}
