package microbatch

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// A worker killed mid-run: the bill's re-read records, reprocess and
// catch-up are what run.Execute measures from the run over time, the same
// for every executor. The kill lands inside a batch with input on every
// partition (a 50 ms trigger): one between batches re-reads nothing here
// (the prefetched records it drops were never processed), so there would
// be no re-read to check. The kill is worker 1's first pass of the point
// after the first batch is committed: a count of passes from the start
// (the fifth, the third batch) was a guess at how many batches a machine
// runs, and a busy one ran fewer, larger ones and did not always reach it.
func TestSeriesBillOfAWorkerKill(t *testing.T) {
	runtest.SeriesBillAt(t, Executor{}, Options{Trigger: 50 * time.Millisecond}, "worker=1,at-point="+PointMidRun+",after-point="+PointAfterCommit)
}

// The lag counts from what finished batches consumed, not from the
// prefetch: after a restore the readers refill their queues within
// milliseconds, but the run has caught up only once batches processed the
// backlog. So the catch-up is at least the time until the first batch
// after the restore is done, which here is held back (firstRerunHold).
// With the readers' positions it was one bucket (≤ 100 ms).
func TestSeriesCatchUpWaitsForTheBatches(t *testing.T) {
	const firstRerunHold = 250 * time.Millisecond
	var held atomic.Bool
	opts := Options{Trigger: 50 * time.Millisecond, LostPieceRecovery: RecoveryRerunBatch, hooks: testHooks{
		onRun: func(_ offsetsEntry, rerun bool) {
			if rerun && held.CompareAndSwap(false, true) {
				time.Sleep(firstRerunHold)
			}
		}}}
	spec, err := fault.Parse("point=" + PointMidRun + ",occurrence=9")
	if err != nil {
		t.Fatal(err)
	}
	cfg := run.Config{Job: "keyed-count", Params: job.Params{Window: 50, JoinWindow: 200}, Executor: "microbatch",
		Inputs: runtest.Gen{Records: 60_000, Keys: 100, Seed: 7, Rate: 40_000}.Inputs("keyed-count"),
		Output: filepath.Join(fastDir(t), "out"), OutputFormat: sink.Parquet, SinkMode: sink.Idempotent,
		Storage: "file://" + fastDir(t), Parallelism: 2, Fails: []fault.Spec{spec}, Seed: 1, Series: true,
		DetectDelay: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(ctx, cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputRequireEmpty)
	if err != nil {
		t.Fatal(err)
	}
	s, err := run.Execute(ctx, Executor{Options: opts}, env)
	if cerr := env.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	alloc.AssertSize(t, 0)
	if !held.Load() || len(s.Recoveries) != 1 || len(s.Series.Phases) != 1 {
		t.Fatalf("rerun held %v, %d recoveries, phases %+v: want one kill inside a batch", held.Load(), len(s.Recoveries), s.Series.Phases)
	}
	ph := s.Series.Phases[0]
	if ph.RestoredMs == nil || ph.CaughtUpMs == nil {
		t.Fatalf("phase %+v: want restored and caught up", ph)
	}
	firstDone := -1.0
	for _, e := range s.Series.Events {
		if e.Kind == "batch" && e.Status == "completed" && e.TMs > *ph.RestoredMs {
			firstDone = e.TMs
			break
		}
	}
	if firstDone < 0 {
		t.Fatalf("no batch completed after the restore at %.1f ms", *ph.RestoredMs)
	}
	if *ph.CaughtUpMs < firstDone {
		t.Fatalf("caught up at %.1f ms, before the first batch after the restore (at %.1f ms) was done at %.1f ms",
			*ph.CaughtUpMs, *ph.RestoredMs, firstDone)
	}
	t.Logf("restored at %.1f ms, first batch done at %.1f ms, caught up at %.1f ms", *ph.RestoredMs, firstDone, *ph.CaughtUpMs)
}
