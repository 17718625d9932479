package bench

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/reference"
)

// echo is a contestant that is the reference under another name: right,
// fast, and taking any worker kill (it never fires). lossy is the same but
// drops the first record of every batch it reads: a broken contestant.
type echo struct {
	name  string
	lossy bool
}

func (e echo) Name() string               { return e.name }
func (e echo) Traits() run.Traits         { return run.Traits{} }
func (e echo) FailPoints() []string       { return nil }
func (e echo) Workers(cfg run.Config) int { return max(cfg.Parallelism, 1) }

func (e echo) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	if e.lossy {
		runtest.DropFirstRows(env.Sources)
	}
	return reference.Executor{}.Run(ctx, env)
}

// doublesPlan is a short scenario of test doubles: 500 ms of input at
// 10,000 records/s, a 100 ms warmup and cadence, so the default fault is
// at 350 ms and its jitter within [350, 450) ms.
func doublesPlan(t *testing.T, alloc memory.Allocator, names ...string) Plan {
	t.Helper()
	execs := map[string]run.Executor{"reference": reference.Executor{}}
	var cs []Contestant
	for _, n := range names {
		execs[n] = echo{name: n, lossy: n == "lossy"}
		cs = append(cs, Contestant{Executor: n})
	}
	return Plan{
		Config: run.Config{Job: "keyed-count", Params: job.DefaultParams, OutputFormat: sink.Parquet,
			SinkMode: sink.Idempotent, Parallelism: 2, Seed: 1},
		Contestants: cs, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Cadence: 100 * time.Millisecond, Rate: 10_000, Repeat: 1, Seed: 1,
		Scratch: t.TempDir(), Executors: execs, Alloc: alloc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}
