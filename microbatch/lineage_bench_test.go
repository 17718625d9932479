package microbatch

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// BenchmarkLostPieceRecovery measures, through the executor, what it costs
// to get back the pieces one dead worker held, as the number of surviving
// goroutine workers grows (1, 2, 4, 8: parallelism 2, 3, 5, 9), under
// both --lost-piece-recovery modes.
//
// The lost work is the same at every width: the input has 8 partitions
// per worker, so the dead worker (whichever reaches batch.mid-run first in
// the third batch) always owns 8 partitions, and every batch is capped at
// perPart records per partition (MaxBatchRecords, with a trigger long
// enough for the readers to hold that much; read-ahead is capped at two
// batches). The figures come from the
// run's own summary:
//
//   - rebuild-ms: lineage: the lineage.Rebuild of the dead worker's pieces
//     on the survivors (re-read from the source, filter/project again);
//     rerun-batch: the run step of the re-run batch on every worker (the
//     whole batch again, after the rollback);
//   - restore-ms: the recovery's restore figure, which adds the replacement
//     worker (state restored for its key groups) and, for lineage, the
//     re-run of its key-group range of the keyed stage;
//   - records-reread: input records fed through the stateless steps again.
//
// Each figure is the median over the iterations; ns/op is a whole run
// (four or five batches) and is not the figure to read.
func BenchmarkLostPieceRecovery(b *testing.B) {
	perPart := *flagLineagePerPart
	for _, jobName := range []string{"etl", "keyed-count"} {
		for _, mode := range []string{RecoveryLineage, RecoveryRerunBatch} {
			for _, survivors := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%s/%s/survivors=%d", jobName, mode, survivors), func(b *testing.B) {
					par := survivors + 1
					parts := 8 * par
					batch := int64(parts * perPart)
					var rebuild, restore, reread []float64
					for b.Loop() {
						s := runLostPieceBench(b, jobName, mode, par, parts, batch)
						lp := s.LostPieces
						if lp == nil || lp.Recoveries != 1 || lp.RebuildMs == nil || len(s.Recoveries) != 1 || s.Recoveries[0].RestoreMs == nil {
							b.Fatalf("no lost-piece recovery measured: %+v", s)
						}
						rebuild = append(rebuild, *lp.RebuildMs)
						restore = append(restore, *s.Recoveries[0].RestoreMs)
						reread = append(reread, float64(lp.RecordsReread))
					}
					// Medians: on a shared machine a single run is easily
					// hit by a pause several times its own length.
					b.ReportMetric(median(rebuild), "rebuild-ms")
					b.ReportMetric(median(restore), "restore-ms")
					b.ReportMetric(median(reread), "records-reread")
				})
			}
		}
	}
}

var flagLineagePerPart = flag.Int("mb.lineage-per-part", 8<<10, "BenchmarkLostPieceRecovery: records per partition per batch (the dead worker owns 8 partitions)")

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

func runLostPieceBench(b *testing.B, jobName, mode string, par, parts int, batch int64) *report.Summary {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := fastDir(b)
	cfg := run.Config{
		Job: jobName, Params: job.DefaultParams, Executor: "microbatch", Output: filepath.Join(dir, "out"),
		Inputs:       map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=1000,partitions=%d,seed=7", 4*batch, parts)},
		OutputFormat: sink.Parquet, SinkMode: sink.Append, Storage: "file://" + filepath.Join(dir, "store"), Parallelism: par,
		Options: Options{Trigger: 300 * time.Millisecond, LostPieceRecovery: mode}, Seed: 1,
		Fails: []fault.Spec{{Worker: -1, Point: PointMidRun, Occurrence: occurrenceFor(PointMidRun, 2, par)}},
	}
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	// Readers hold at most two batches ahead, so background read-ahead
	// competes with the recovery as little as the protocol allows.
	s, err := Executor{Options: Options{MaxBatchRecords: batch, PrefetchRecords: 2 * batch / int64(parts)}}.Run(ctx, env)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
