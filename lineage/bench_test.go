package lineage

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// BenchmarkRebuild measures the rebuild after one worker dies, as the
// number of surviving goroutine workers grows. The job is etl (filter,
// project) over gen: 16 pieces of 64Ki records (4 partitions × 4 ranges).
// The lost worker held 4 of them, one per partition; the other 12 live on
// survivors.
//
//   - lineage/survivors=N: Plan + Rebuild of the 4 lost pieces on N workers;
//   - rerun-batch/survivors=N: the same 16 pieces re-run in full on the
//     same N workers (PlanRerun), the cost of recovering by redoing the
//     whole batch.
//
// Both report records_reread per rebuild. Goroutine workers share the
// machine's cores, so beyond GOMAXPROCS workers the curve flattens.
//
// This is the planner and the rebuild alone, on a fixed lost set, with no
// executor around them: no replacement worker, no state, no read-ahead
// competing for the cores. The same recovery measured through the
// micro-batch executor, with its keyed stage and its rerun-batch
// alternative, is microbatch's BenchmarkLostPieceRecovery.
func BenchmarkRebuild(b *testing.B) {
	const (
		parts     = 4
		perPart   = 4
		pieceRecs = 64 << 10
	)
	j, err := job.Build("etl", job.DefaultParams)
	if err != nil {
		b.Fatal(err)
	}
	src, err := source.Open(fmt.Sprintf("gen:records=%d,partitions=%d,keys=1000,seed=42", parts*perPart*pieceRecs, parts), source.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	steps, err := StepsFor(j, "filter", "project")
	if err != nil {
		b.Fatal(err)
	}
	const lostWorker = WorkerID(0)
	g := NewGraph()
	var all []PieceID
	for p := range parts {
		for k := range perPart {
			w := WorkerID(100 + k) // alive whatever N is
			if k == p {
				w = lostWorker // one piece per partition on the lost worker
			}
			start := int64(k * pieceRecs)
			d := Derivation{ID: PieceID(fmt.Sprintf("p%d/%d", p, k)), Worker: w, Steps: steps,
				Input: &InputRange{Input: job.DefaultInput, Partition: p, Start: source.Position{Partition: fmt.Sprintf("p%d", p), Offset: start}, End: start + pieceRecs}}
			if err := g.Add(d); err != nil {
				b.Fatal(err)
			}
			all = append(all, d.ID)
		}
	}
	env := Env{Job: j, Sources: map[string]source.Source{job.DefaultInput: src}, Alloc: memory.NewGoAllocator()}
	for _, mode := range []string{"lineage", "rerun-batch"} {
		for _, n := range []int{1, 2, 4, 8} {
			survivors := make([]WorkerID, n)
			for i := range survivors {
				survivors[i] = WorkerID(1 + i)
			}
			b.Run(fmt.Sprintf("%s/survivors=%d", mode, n), func(b *testing.B) {
				var m report.PieceLoss
				for b.Loop() {
					var plan RebuildPlan
					var err error
					if mode == "lineage" {
						plan, err = Plan(g, []WorkerID{lostWorker}, all, survivors)
					} else {
						plan, err = PlanRerun(g, all, survivors)
					}
					if err != nil {
						b.Fatal(err)
					}
					res, err := Rebuild(context.Background(), plan, env)
					if err != nil {
						b.Fatal(err)
					}
					m = res.Loss
					res.Release()
				}
				b.ReportMetric(float64(m.PiecesRebuilt), "pieces")
				b.ReportMetric(float64(m.RecordsReread), "records_reread")
			})
		}
	}
}
