package operator_test

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

func TestAddInt64(t *testing.T) {
	for _, c := range []struct {
		a, b  int64
		exact bool
	}{
		{1, 2, true}, {math.MaxInt64 - 1, 1, true}, {math.MaxInt64, 1, false}, {math.MinInt64, -1, false},
		{math.MinInt64, math.MaxInt64, true}, {1 << 62, 1 << 62, false}, {-(1 << 62), -(1 << 62), true},
		{-(1 << 62), -(1 << 62) - 1, false}, {0, math.MinInt64, true},
	} {
		s, ok := operator.AddInt64(c.a, c.b)
		if ok != c.exact || ok && s != c.a+c.b {
			t.Errorf("AddInt64(%d, %d) = %d, %v; want exact=%v", c.a, c.b, s, ok, c.exact)
		}
	}
}

// kaggProcessErr processes rows and returns Process's error.
func kaggProcessErr(op operator.Operator, mem memory.Allocator, rows [][]int64) error {
	b := optest.Batch(mem, tsSrcSchema, rows)
	defer b.Release()
	return op.Process(0, b, nil)
}

func repeatRows(key, value int64, n int) [][]int64 {
	var rows [][]int64
	for i := range n {
		rows = append(rows, []int64{int64(i), key, value, 0})
	}
	return rows
}

// A keyed sum past the int64 range fails, naming the key, instead of
// wrapping (3·2^62 once read as -4611686018427387904). Both copies of the
// hot loop and the path for nullable sums are covered, in both directions.
func TestKeyedAggSumOverflowFails(t *testing.T) {
	const big = int64(1) << 62
	check := func(t *testing.T, err error, key int64) {
		t.Helper()
		if !errors.Is(err, operator.ErrSumOverflow) || !strings.Contains(err.Error(), "key "+strconv.FormatInt(key, 10)+":") {
			t.Fatalf("got %v; want ErrSumOverflow naming key %d", err, key)
		}
	}
	t.Run("branch-free", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		op := ktOpen(t, mem, keygroup.All)
		check(t, kaggProcessErr(op, mem, repeatRows(7, big, 3)), 7)
		op.Close()
		mem.AssertSize(t, 0)
	})
	t.Run("branchy", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		op := ktOpen(t, mem, keygroup.All)
		// A batch of only first changes makes the next batch take the
		// branchy copy.
		var first [][]int64
		for k := range int64(100) {
			first = append(first, []int64{k, k, big, 0})
		}
		if err := kaggProcessErr(op, mem, first); err != nil {
			t.Fatal(err)
		}
		second := append(repeatRows(3, 1, 1), repeatRows(42, big, 1)...)
		check(t, kaggProcessErr(op, mem, second), 42)
		op.Close()
		mem.AssertSize(t, 0)
	})
	t.Run("negative", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		op := ktOpen(t, mem, keygroup.All)
		check(t, kaggProcessErr(op, mem, repeatRows(-5, -big, 3)), -5)
		op.Close()
		mem.AssertSize(t, 0)
	})
	t.Run("nullable", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		op := ktOpen(t, mem, keygroup.All)
		b := nullableBatch(mem, []int64{9, 9, 9, 9}, []int64{big, 0, big, big}, []bool{true, false, true, true})
		err := op.Process(0, b, nil)
		b.Release()
		check(t, err, 9)
		op.Close()
		mem.AssertSize(t, 0)
	})
	t.Run("up to the edge is exact", func(t *testing.T) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		op := ktOpen(t, mem, keygroup.All)
		ktProcess(t, op, mem, ktRows(1, math.MaxInt64-1, 1, 1, 2, math.MinInt64, 2, 0, 3, math.MaxInt64, 3, math.MinInt64))
		got := optest.Sorted(ktFlush(t, op))
		want := [][]int64{{1, 2, math.MaxInt64, 0}, {2, 2, math.MinInt64, 0}, {3, 2, -1, 0}}
		if len(got) != len(want) {
			t.Fatalf("flushed %v, want %v", got, want)
		}
		for i := range want {
			if got[i][0] != want[i][0] || got[i][1] != want[i][1] || got[i][2] != want[i][2] {
				t.Fatalf("flushed %v, want (key, count, sum) %v", got, want)
			}
		}
		op.Close()
		mem.AssertSize(t, 0)
	})
}

func nullableBatch(mem memory.Allocator, keys, vals []int64, valid []bool) arrow.RecordBatch {
	cols := make([]arrow.Array, 4)
	for c := range cols {
		bld := array.NewInt64Builder(mem)
		switch c {
		case 1:
			bld.AppendValues(keys, nil)
		case 2:
			bld.AppendValues(vals, valid)
		default:
			bld.AppendValues(make([]int64, len(keys)), nil)
		}
		cols[c] = bld.NewArray()
		bld.Release()
	}
	b := array.NewRecordBatch(tsSrcSchema, cols, int64(len(keys)))
	for _, c := range cols {
		c.Release()
	}
	return b
}

// A window's sum past the int64 range fails the same way.
func TestWindowSumOverflowFails(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	op := newWinOp(t, 1000)
	winOpen(t, op, mem, keygroup.All)
	b := winBatch(t, mem, winInSchema, [][]int64{{0, 4, 1 << 62, 10}, {1, 4, 1 << 62, 20}, {2, 4, 1 << 62, 30}})
	err := op.Process(0, b, nil)
	b.Release()
	if !errors.Is(err, operator.ErrSumOverflow) || !strings.Contains(err.Error(), "key 4, window starting at 0") {
		t.Fatalf("got %v; want ErrSumOverflow naming key 4 and its window", err)
	}
	op.Close()
	mem.AssertSize(t, 0)
}
