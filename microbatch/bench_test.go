package microbatch

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchtime 1x ./microbatch/
//
// Each reports its figures with ReportMetric. "disk" puts durable storage
// and the output on the default temp directory (this machine's disk, where
// every Put pays a file fsync and a directory fsync); "ram" puts them on
// /dev/shm, which isolates the protocol's own cost from the medium. Add
// -mb.compare to measure each case before and after the seal overlap and
// planning ahead, alternating, under the same load.

// flagCompare runs every case twice: as the executor is (after) and as it
// was before the state write and the sink flush overlapped and before
// batches were planned ahead (the serialSeal and noPlanAhead hooks), so
// that both are measured under the same load.
var flagCompare = flag.Bool("mb.compare", false, "BenchmarkEmptyBatch, BenchmarkKeyedCount: also run each case as the executor was before the seal overlap and planning ahead")

// benchVariant is one variant of the executor a benchmark case runs as.
type benchVariant struct {
	name  string // sub-benchmark suffix
	hooks testHooks
}

// variants returns the executor as it is, and with -mb.compare also as it
// was before, first.
func variants() []benchVariant {
	if !*flagCompare {
		return []benchVariant{{}}
	}
	return []benchVariant{{"/before", testHooks{serialSeal: true, noPlanAhead: true}}, {"/after", testHooks{}}}
}

// benchDirs returns the media to benchmark on.
func benchDirs(b *testing.B) map[string]func() string {
	out := map[string]func() string{"disk": func() string { return b.TempDir() }}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		out["ram"] = func() string {
			d, err := os.MkdirTemp("/dev/shm", "rewind-mb-bench-")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return out
}

// idleSource is an endless, re-readable input that never has a record: a
// batch over it is empty, which is what the fixed-cost benchmark needs.
type idleSource struct{}

func (idleSource) Spec() string         { return "idle:" }
func (idleSource) Partitions() []string { return []string{"p0"} }
func (idleSource) Rereadable() bool     { return true }
func (idleSource) Bounded() bool        { return false }
func (idleSource) Close() error         { return nil }
func (idleSource) Open(context.Context, int, source.Position, memory.Allocator) (source.Reader, error) {
	return idleReader{}, nil
}

type idleReader struct{}

func (idleReader) Next(ctx context.Context, _ int) (arrow.RecordBatch, source.Position, error) {
	<-ctx.Done()
	return nil, source.Position{Partition: "p0"}, ctx.Err()
}
func (idleReader) Lost() int64  { return 0 }
func (idleReader) Close() error { return nil }

// BenchmarkEmptyBatch is the fixed cost of one batch with no input: plan,
// offsets log, an empty run, no state change, an empty sink flush, commit
// log. ns/op is per batch.
func BenchmarkEmptyBatch(b *testing.B) {
	for medium, dir := range benchDirs(b) {
		for _, v := range variants() {
			benchEmptyBatch(b, medium+v.name, dir, v.hooks)
		}
	}
}

// benchEmptyBatch runs one case of BenchmarkEmptyBatch.
func benchEmptyBatch(b *testing.B, name string, dir func() string, hooks testHooks) {
	b.Run(name, func(b *testing.B) {
		ctx := context.Background()
		j, err := job.Build("keyed-count", job.DefaultParams)
		if err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(dir(), "out")
		snk, err := sink.Open(out, sink.Idempotent, sink.Parquet, j.Output, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		st, err := storage.Open(ctx, dir(), storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		env := &run.Env{
			Config: run.Config{Job: j.Name, Params: j.Params, Parallelism: 2, Options: Options{Trigger: time.Nanosecond}, SinkMode: sink.Idempotent},
			Job:    j, Sources: map[string]source.Source{job.DefaultInput: idleSource{}}, Sink: snk, Store: st,
			Alloc: memory.DefaultAllocator, Faults: fault.NewInjector(nil), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		defer env.Close()
		b.ResetTimer()
		start := time.Now()
		s, err := Executor{Options: Options{IdleBatches: true, MaxBatches: b.N, hooks: hooks}}.Run(ctx, env)
		if err != nil {
			b.Fatal(err)
		}
		el := time.Since(start)
		b.StopTimer()
		if s.Checkpoints.Completed != b.N {
			b.Fatalf("%d batches committed, want %d", s.Checkpoints.Completed, b.N)
		}
		b.ReportMetric(float64(el.Microseconds())/1000/float64(b.N), "ms/batch")
	})
}

// BenchmarkKeyedCount runs keyed-count on the generator at 1M records/s
// (paced: the rate a sustained feed offers) and unpaced (as fast as the
// pipeline goes), at trigger 10ms and 100ms, parallelism 2, append sink,
// and reports sustained throughput (committed records / wall time) and
// end-to-end latency percentiles (hand-over to visibility at the sink).
func BenchmarkKeyedCount(b *testing.B) {
	records := 3_000_000
	if testing.Short() {
		records = 500_000
	}
	for medium, dir := range benchDirs(b) {
		for _, trigger := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
			for _, rate := range []int{1_000_000, 2_000_000, 0} {
				for _, v := range variants() {
					name := fmt.Sprintf("%s/trigger=%s/rate=%d%s", medium, trigger, rate, v.name)
					benchKeyedCount(b, name, dir, records, trigger, rate, v.hooks)
				}
			}
		}
	}
}

// benchKeyedCount runs one keyed-count case.
func benchKeyedCount(b *testing.B, name string, dir func() string, records int, trigger time.Duration, rate int, hooks testHooks) {
	b.Run(name, func(b *testing.B) {
		for range b.N {
			spec := fmt.Sprintf("gen:records=%d,keys=1000,seed=1", records)
			if rate > 0 {
				spec += fmt.Sprintf(",rate=%d", rate)
			}
			cfg := run.Config{Job: "keyed-count", Params: job.DefaultParams, Executor: "microbatch",
				Inputs: map[string]string{job.DefaultInput: spec}, Output: filepath.Join(dir(), "out"),
				OutputFormat: sink.Parquet, SinkMode: sink.Append, Storage: "file://" + dir(), Parallelism: 2,
				Options: Options{Trigger: trigger}, Seed: 1}
			ctx := context.Background()
			env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
			if err != nil {
				b.Fatal(err)
			}
			s, err := Executor{Options: Options{hooks: hooks}}.Run(ctx, env)
			if err != nil {
				b.Fatal(err)
			}
			_ = env.Close()
			if s.LatencyMs == nil {
				b.Fatal("no latency measured")
			}
			b.ReportMetric(s.ThroughputRPS, "records/s")
			b.ReportMetric(s.LatencyMs.P50, "p50_ms")
			b.ReportMetric(s.LatencyMs.P99, "p99_ms")
			b.ReportMetric(s.LatencyMs.Max, "max_ms")
			b.ReportMetric(float64(s.Checkpoints.Completed), "batches")
			if testing.Verbose() {
				for _, n := range s.Notes {
					b.Log(n)
				}
			}
		}
	})
}
