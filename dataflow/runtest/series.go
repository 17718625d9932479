package runtest

import (
	"context"
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

// SeriesBillRecords is the input of SeriesBill: one second of a paced
// generator.
const SeriesBillRecords = 40_000

// SeriesBill runs exec (with opts) through run.Execute on one second of
// paced generated input with worker 0 killed after 15,000 records, and
// judges the part of the bill run.Execute measures from the run over time:
// the crash re-read records (reprocessed_records > 0), exactly the records
// the readers read beyond the input once (with one crash, every re-read is its own),
// and the lag came back (catch_up_ms and recovered_ms measured).
func SeriesBill(t *testing.T, exec run.Executor, opts run.Options) {
	t.Helper()
	SeriesBillAt(t, exec, opts, "worker=0,after-records=15000")
}

// SeriesBillAt is SeriesBill with the crash given as a --fail value: an
// executor that re-reads nothing unless a crash finds work in flight
// (microbatch between batches) names a point inside that work.
func SeriesBillAt(t *testing.T, exec run.Executor, opts run.Options, fail string) {
	t.Helper()
	spec, err := fault.Parse(fail)
	if err != nil {
		t.Fatal(err)
	}
	cfg := run.Config{Job: "keyed-count", Params: job.Params{Window: 50, JoinWindow: 200}, Executor: exec.Name(),
		Options: opts, Inputs: Gen{Records: SeriesBillRecords, Keys: 100, Seed: 7, Rate: SeriesBillRecords}.Inputs("keyed-count"),
		Output: filepath.Join(FastDir(t, "series-out", false), "out"), OutputFormat: sink.Parquet, SinkMode: sink.Idempotent,
		Storage: "file://" + FastDir(t, "series-store", false), Parallelism: 2, Fails: []fault.Spec{spec}, Seed: 1, Series: true}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(ctx, cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputRequireEmpty)
	if err != nil {
		t.Fatal(err)
	}
	s, err := run.Execute(ctx, exec, env)
	if cerr := env.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	alloc.AssertSize(t, 0)
	if s.Crashes != 1 || len(s.Recoveries) != 1 {
		t.Fatalf("%d crashes, %d recoveries; want the one kill", s.Crashes, len(s.Recoveries))
	}
	r := s.Recoveries[0]
	// What the readers handed over, which records_in may not count in
	// full (a batch read ahead and dropped by the crash).
	var read, reread int64
	for _, b := range s.Series.Buckets {
		read, reread = read+b.Processed, reread+b.Reread
	}
	again := read - SeriesBillRecords
	if r.ReprocessedRecords == nil || *r.ReprocessedRecords <= 0 || *r.ReprocessedRecords != again || reread != again {
		t.Fatalf("reprocessed_records %v, series re-reads %d; the readers read %d records of %d (records_in %d), so %d again: want that, and > 0",
			ptrString(r.ReprocessedRecords), reread, read, SeriesBillRecords, s.RecordsIn, again)
	}
	if r.CatchUpMs == nil || r.RecoveredMs == nil || r.ReprocessMs == nil || len(s.Series.Phases) != 1 || s.Series.Phases[0].CaughtUpMs == nil {
		t.Fatalf("catch_up_ms %v, recovered_ms %v, reprocess_ms %v, phases %+v: want all measured", r.CatchUpMs, r.RecoveredMs, r.ReprocessMs, s.Series.Phases)
	}
	t.Logf("%s: at %.1f ms, reprocessed %d records in %.1f ms, caught up %.1f ms after restoring, recovered %.1f ms after the fault",
		exec.Name(), *r.AtMs, *r.ReprocessedRecords, *r.ReprocessMs, *r.CatchUpMs, *r.RecoveredMs)
}
