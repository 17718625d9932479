package microbatch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
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
// enough for the readers to hold that much). The figures come from the
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
// ns/op is a whole run (four batches) and is not the figure to read.
func BenchmarkLostPieceRecovery(b *testing.B) {
	const perPart = 8 << 10
	for _, jobName := range []string{"etl", "keyed-count"} {
		for _, mode := range []string{RecoveryLineage, RecoveryRerunBatch} {
			for _, survivors := range []int{1, 2, 4, 8} {
				b.Run(fmt.Sprintf("%s/%s/survivors=%d", jobName, mode, survivors), func(b *testing.B) {
					par := survivors + 1
					parts := 8 * par
					batch := int64(parts * perPart)
					var rebuild, restore, reread float64
					for b.Loop() {
						s := runLostPieceBench(b, jobName, mode, par, parts, batch)
						lp := s.LostPieces
						if lp == nil || lp.Recoveries != 1 || lp.RebuildMs == nil || len(s.Recoveries) != 1 || s.Recoveries[0].RestoreMs == nil {
							b.Fatalf("no lost-piece recovery measured: %+v", s)
						}
						rebuild += *lp.RebuildMs
						restore += *s.Recoveries[0].RestoreMs
						reread += float64(lp.RecordsReread)
					}
					n := float64(b.N)
					b.ReportMetric(rebuild/n, "rebuild-ms")
					b.ReportMetric(restore/n, "restore-ms")
					b.ReportMetric(reread/n, "records-reread")
				})
			}
		}
	}
}

func runLostPieceBench(b *testing.B, jobName, mode string, par, parts int, batch int64) *run.Summary {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := fastDir(b)
	cfg := run.Config{
		Job: jobName, Params: job.DefaultParams, Executor: "microbatch", Output: filepath.Join(dir, "out"),
		Inputs:       map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=1000,partitions=%d,seed=7", 4*batch, parts)},
		OutputFormat: sink.Parquet, SinkMode: sink.Append, Storage: "file://" + filepath.Join(dir, "store"), Parallelism: par,
		Trigger: 150 * time.Millisecond, Seed: 1, LostPieceRecovery: mode,
		Fails: []fault.Spec{{Worker: -1, Point: PointMidRun, Occurrence: occurrenceFor(PointMidRun, 2, par)}},
	}
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	s, err := Executor{Options: Options{MaxBatchRecords: batch}}.Run(ctx, env)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
