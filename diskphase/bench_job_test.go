package diskphase

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// BenchmarkKeyedCountJob runs what
//
//	rewind run --executor diskphase --job keyed-count --parallelism 2 \
//	  --input gen:records=4000000,keys=100000,partitions=2 --output OUT --storage file://DIR
//
// does, in this process: the same Prepare and Execute (the run, the
// output's resolution), storage and output on the real disk under the
// benchmark's temporary directory. records/s is the summary's throughput,
// the figure `rewind bench cost` divides by the reference's; a CPU profile
// of it (-cpuprofile) is a profile of the CLI's run.
func BenchmarkKeyedCountJob(b *testing.B) {
	const records = 4_000_000
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var tput float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		cfg := run.Config{Job: "keyed-count", Params: job.DefaultParams, Executor: "diskphase",
			Inputs:       map[string]string{job.DefaultInput: "gen:records=4000000,keys=100000,partitions=2"},
			Output:       filepath.Join(dir, "out"),
			OutputFormat: sink.Parquet, SinkMode: sink.Append, Storage: "file://" + filepath.Join(dir, "store"),
			Parallelism: 2, Options: Options{}, Seed: 1, RunID: run.NewRunID()}
		env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), log, true, run.OutputOverwrite)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		s, err := run.Execute(ctx, Executor{}, env)
		wall := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if s.RecordsIn != records {
			b.Fatalf("read %d records, want %d", s.RecordsIn, records)
		}
		if err := env.Close(); err != nil {
			b.Fatal(err)
		}
		tput += s.ThroughputRPS
		b.ReportMetric(float64(records)/wall.Seconds()/1e6, "M-records/s-wall")
	}
	b.ReportMetric(tput/float64(b.N)/1e6, "M-records/s")
}
