package microbatch

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

var scbSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// BenchmarkStateCommitCPU is one subtask's share of the CLI's keyed-count
// at 100 k keys, 2 subtasks, 10 k records per batch: the CPU work of a
// delta version (snapshot or hand-over, compare, edits, encoding), no
// storage. "whole" snapshots and diffs every entry, "changes" uses the
// operator's hand-over.
func BenchmarkStateCommitCPU(b *testing.B) {
	for _, perBatch := range []int{5_000, 500} {
		for _, mode := range []string{"whole", "changes"} {
			b.Run(fmt.Sprintf("%s/rows=%d", mode, perBatch), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				alloc := memory.NewGoAllocator()
				op, err := operator.NewKeyedAgg(scbSchema, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"})
				if err != nil {
					b.Fatal(err)
				}
				kgs := keygroup.RangeFor(0, 2)
				if err := op.Open(operator.Context{Alloc: alloc, Parallelism: 2, KeyGroups: kgs}); err != nil {
					b.Fatal(err)
				}
				defer op.Close()
				w := &worker{ops: []operator.Operator{op}, base: make([][keygroup.Count]arrow.RecordBatch, 1)}
				w.initChanges(1)
				w.usesChanges = []bool{mode == "changes"}
				defer w.releaseBase()
				var keys []int64
				for k := int64(0); len(keys) < 50_000; k++ {
					if kgs.Contains(keygroup.Of(k)) {
						keys = append(keys, k)
					}
				}
				rng := rand.New(rand.NewPCG(1, 2))
				var cpu time.Duration
				batch := func(n int) arrow.RecordBatch {
					rows := make([][]int64, n)
					for i := range rows {
						rows[i] = []int64{keys[rng.IntN(len(keys))], 1}
					}
					return optest.Batch(alloc, scbSchema, rows)
				}
				commit := func() {
					b.StopTimer()
					in := batch(perBatch)
					if err := op.Process(0, in, nil); err != nil {
						b.Fatal(err)
					}
					in.Release()
					if err := op.Flush(operator.EmitFunc(func(arrow.RecordBatch) error { return nil })); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					c0 := threadCPU()
					s, err := w.takeSnapshot(0, alloc)
					if err != nil {
						b.Fatal(err)
					}
					if _, _, _, err := s.encode("bench", false); err != nil {
						b.Fatal(err)
					}
					s.keepAsBase()
					w.changesDurable()
					cpu += threadCPU() - c0
				}
				// Every key once, then a first version as the base.
				in := optest.Batch(alloc, scbSchema, func() [][]int64 {
					rows := make([][]int64, len(keys))
					for i, k := range keys {
						rows[i] = []int64{k, 1}
					}
					return rows
				}())
				_ = op.Process(0, in, nil)
				in.Release()
				commit()
				b.ResetTimer()
				cpu = 0
				for range b.N {
					commit()
				}
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// threadCPU is the calling thread's CPU time: the commit runs on one
// goroutine (locked to its thread), and on a shared machine the CPU it
// took says more than the wall time it waited.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
