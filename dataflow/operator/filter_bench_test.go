package operator_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"

	"github.com/rewind-engine/rewind/dataflow/operator"
)

// fbBatch is a source-shaped batch of benchRows rows whose values are >= 0
// with probability pass.
func fbBatch(pass float64) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(3, 4))
	cols := make([]arrow.Array, 4)
	for c := range cols {
		arr, vals := operator.AllocInt64(memory.DefaultAllocator, benchRows)
		for i := range vals {
			vals[i] = int64(i)
			if c == 2 {
				vals[i] = r.Int64N(1000)
				if r.Float64() >= pass {
					vals[i] = -1 - vals[i]
				}
			}
		}
		cols[c] = arr
	}
	return operator.NewBatchOwning(tsSrcSchema, benchRows, cols...)
}

var fbCases = []struct {
	name string
	pass float64
}{{"pass50", 0.5}, {"pass95", 0.95}}

// BenchmarkFilter is the operator: a branch-free selection vector, then a
// gather per int64 column.
func BenchmarkFilter(b *testing.B) {
	for _, c := range fbCases {
		b.Run(c.name, func(b *testing.B) {
			in := fbBatch(c.pass)
			defer in.Release()
			f, err := operator.NewFilterAtLeast(tsSrcSchema, "value", 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			rows := 0
			for b.Loop() {
				if err := f.Process(0, in, benchDiscard); err != nil {
					b.Fatal(err)
				}
				rows += benchRows
			}
			benchReport(b, rows)
		})
	}
}

// BenchmarkFilterCompute is the same filter with arrow-go's compute kernels
// (greater_equal, then FilterRecordBatch), as the yardstick.
func BenchmarkFilterCompute(b *testing.B) {
	ctx := compute.WithAllocator(context.Background(), memory.DefaultAllocator)
	zero := compute.NewDatum(scalar.NewInt64Scalar(0))
	for _, c := range fbCases {
		b.Run(c.name, func(b *testing.B) {
			in := fbBatch(c.pass)
			defer in.Release()
			rows := 0
			for b.Loop() {
				mask, err := compute.CallFunction(ctx, "greater_equal", nil, compute.NewDatum(in.Column(2)), zero)
				if err != nil {
					b.Fatal(err)
				}
				arr := mask.(*compute.ArrayDatum).MakeArray()
				out, err := compute.FilterRecordBatch(ctx, in, arr, compute.DefaultFilterOptions())
				if err != nil {
					b.Fatal(err)
				}
				out.Release()
				arr.Release()
				mask.Release()
				rows += benchRows
			}
			benchReport(b, rows)
		})
	}
}
