package microbatch

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

var (
	scheduleFlags = runtest.NewScheduleFlags("mb", 200)
	flagDisk      = flag.Bool("mb.disk", false, "put test storage and outputs on the default temp dir even when a RAM disk exists")
)

func TestMain(m *testing.M) {
	if os.Getenv(testWorkerEnv) == "1" {
		os.Exit(runtest.WorkerMain(Executor{})) // this binary, started as a worker process
	}
	runtest.Main(m)
}

// fastDir returns a fresh directory for storage or output, on a RAM disk
// unless -mb.disk is set.
func fastDir(t testing.TB) string {
	t.Helper()
	return runtest.FastDir(t, "rewind-mb-", *flagDisk)
}

// defaultInputs are small inputs per job, so the whole matrix stays fast.
func defaultInputs(jobName string, records int, seed int64) map[string]string {
	return runtest.Gen{Records: records, Keys: 200, JoinKeys: records / 4, Seed: seed}.Inputs(jobName)
}

// scenario is one run of the executor against the oracle.
type scenario struct {
	job         string
	inputs      map[string]string
	mode        sink.Mode
	roll        sink.RollPolicy // append: when in-progress files roll (zero: every flush visible)
	parallelism int
	fails       []fault.Spec
	opts        Options
	storage     string // URL; default: a fresh local directory
	output      string // default: a fresh directory
	params      *job.Params
	progress    io.Writer
	// ledger, when set, wraps the sink in a recordingSink (dedup drops
	// re-delivered batch ids).
	ledger *batchLedger
	dedup  bool
	// resumed runs the scenario as a --resume process (run.Config.Resumed).
	resumed bool
	// detect and acquire are the modelled replacement delays.
	detect, acquire time.Duration
	// trace, if set, records the run's time-space events.
	trace *spacetime.Recorder
	// workers: process runs the workers as processes of this test binary;
	// heartbeatTimeout declares a silent one dead (0: the default).
	workers          run.WorkerMode
	heartbeatTimeout time.Duration
	// backToBack runs with a trigger of 0 instead of the tests' 1ms.
	backToBack bool
}

type outcome struct {
	summary *report.Summary
	stats   sink.Stats
	table   *sink.Table
	want    *runtest.Want
	env     *run.Env
	faults  *fault.Injector
	err     error
	// procs is the run's worker processes (workers process).
	procs *procRun
}

func (sc *scenario) config(t testing.TB) run.Config {
	t.Helper()
	if sc.parallelism == 0 {
		sc.parallelism = 2
	}
	if sc.mode == "" {
		sc.mode = sink.Idempotent
	}
	if sc.storage == "" {
		sc.storage = "file://" + fastDir(t)
	}
	if sc.output == "" {
		sc.output = filepath.Join(fastDir(t), "out")
	}
	// Small event-time bounds, so windows fire and the join evicts state
	// in the middle of the run, not only at the end of the input.
	p := job.Params{Window: 50, JoinWindow: 200, MaxDisorder: 0}
	if sc.params != nil {
		p = *sc.params
	}
	trigger := time.Millisecond
	if sc.backToBack {
		trigger = 0
	}
	return run.Config{
		Job: sc.job, Params: p, Executor: "microbatch", Inputs: sc.inputs, Output: sc.output,
		OutputFormat: sink.Parquet, SinkMode: sc.mode, SinkRoll: sc.roll, Storage: sc.storage, Parallelism: sc.parallelism,
		Options: Options{Trigger: trigger}, Fails: sc.fails, Seed: 1, Progress: sc.progress, Resumed: sc.resumed,
		DetectDelay: sc.detect, AcquireDelay: sc.acquire, Workers: sc.workers, HeartbeatTimeout: sc.heartbeatTimeout,
	}
}

// execute runs the scenario and resolves the output; it does not judge.
// The checked allocator must be back at zero when everything is closed.
func (sc *scenario) execute(t testing.TB) *outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := sc.config(t)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := run.Prepare(ctx, cfg, alloc, log, true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if sc.ledger != nil {
		env.Sink = &recordingSink{Sink: env.Sink, ledger: sc.ledger, cols: sink.ColumnNames(env.Job.Output.Schema), dedup: sc.dedup}
	}
	env.Trace = sc.trace
	o := &outcome{env: env, faults: env.Faults}
	opts := sc.opts
	if sc.workers == run.WorkersProcess {
		env.WorkerCommand = testWorkerCommand()
		prev := opts.hooks.onProcs
		opts.hooks.onProcs = func(pr *procRun) {
			o.procs = pr
			if prev != nil {
				prev(pr)
			}
		}
	}
	o.summary, o.err = Executor{Options: opts}.Run(ctx, env)
	if o.err == nil {
		if err := run.Finish(env, o.summary); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
	if err := env.Close(); err != nil {
		t.Fatalf("closing env: %v", err)
	}
	alloc.AssertSize(t, 0)
	if o.err != nil {
		return o
	}
	o.table, o.stats, o.want = runtest.ReadBack(t, env, true)
	return o
}

// result is the run as runtest judges it: runtest.CheckOutput (the
// resolved output equals the reference's, the idempotent and transactional
// sinks show no duplicate, and the summary's duplicate count is what an
// independent reader counts), then checkConflicts.
func (o *outcome) result() runtest.Result {
	return runtest.Result{Outcome: runtest.Outcome{Err: o.err, Env: o.env, Summary: o.summary, Table: o.table, Stats: o.stats, Want: o.want},
		Check: o.checkConflicts}
}

// check judges an outcome as result says.
func (o *outcome) check(t testing.TB, what string) { t.Helper(); o.result().Judge(t, what) }

// checkConflicts: no visible row conflicts with another, whatever the sink:
// a replayed batch reads the offsets it recorded, so it emits what it
// emitted before.
func (o *outcome) checkConflicts(t testing.TB, what string) {
	t.Helper()
	if o.stats.ConflictingRows != 0 {
		t.Fatalf("%s: %d visible rows share write key and _version with a different row", what, o.stats.ConflictingRows)
	}
}

// checkRecoveries: every recovery that ran is billed in full, and every
// batch re-delivered to the ledger (when there is one) held the rows of
// its first delivery.
func (o *outcome) checkRecoveries(t testing.TB, what string, l *batchLedger) {
	t.Helper()
	for i, r := range o.summary.Recoveries {
		if strings.Contains(r.Cause, "no recovery ran") {
			continue
		}
		if r.DetectMs == nil || r.RestoreMs == nil || r.ReprocessedRecords == nil {
			t.Fatalf("%s: recovery %d (%s) is incomplete: %+v", what, i, r.Cause, r)
		}
	}
	if l != nil && len(l.mismatch) > 0 {
		t.Fatalf("%s: a re-delivered batch differs from its first delivery: %s", what, strings.Join(l.mismatch, "; "))
	}
}
