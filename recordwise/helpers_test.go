package recordwise

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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
	"github.com/rewind-engine/rewind/dataflow/storage"
)

var (
	scheduleFlags = runtest.NewScheduleFlags("rw", 200)
	flagDisk      = flag.Bool("rw.disk", false, "put test storage and outputs on the default temp dir even when a RAM disk exists")
	flagVerbose   = flag.Bool("rw.v", false, "print progress events of the runs")
)

func TestMain(m *testing.M) {
	if os.Getenv(testWorkerEnv) == "1" {
		os.Exit(runtest.WorkerMain(Executor{})) // this binary, started as a worker process
	}
	runtest.Main(m)
}

// fastDir returns a fresh directory for storage or output, on a RAM disk
// unless -rw.disk is set.
func fastDir(t testing.TB) string {
	t.Helper()
	return runtest.FastDir(t, "rewind-rw-", *flagDisk)
}

// jobs are the built-in jobs, modes the barrier settings, sinks the
// delivery contracts every matrix covers.
var (
	jobs  = []string{"keyed-count", "windowed-sum", "join", "etl"}
	sinks = []sink.Mode{sink.Append, sink.Idempotent, sink.Transactional}
	modes = []barrierSetting{{"aligned", 0}, {"unaligned", 0}, {"aligned", time.Millisecond}}
)

type barrierSetting struct {
	barriers string
	timeout  time.Duration
}

// bothBarrierModes are the two barrier modes, without an alignment
// timeout: what a test runs each case in when the mode matters.
var bothBarrierModes = []barrierSetting{{"aligned", 0}, {"unaligned", 0}}

func (b barrierSetting) String() string {
	if b.timeout > 0 {
		return fmt.Sprintf("aligned-timeout-%s", b.timeout)
	}
	return b.barriers
}

// inputs returns small inputs for a job: records in total, paced at rate
// records/s (0: as fast as possible).
func inputs(jobName string, records int, rate int, seed int64) map[string]string {
	return runtest.Gen{Records: records, Keys: 200, JoinKeys: records / 4, Seed: seed, Rate: rate}.Inputs(jobName)
}

// scenario is one run of the executor against the oracle.
type scenario struct {
	job         string
	inputs      map[string]string
	mode        sink.Mode
	roll        sink.RollPolicy // append: when in-progress files roll (zero: every flush visible)
	barriers    barrierSetting
	parallelism int
	interval    time.Duration
	detect      time.Duration
	acquire     time.Duration
	fails       []fault.Spec
	opts        Options
	format      sink.Format
	progress    io.Writer
	cpTimeout   time.Duration
	noOracle    bool
	// plainAlloc uses the Go allocator without the checks (benchmarks).
	plainAlloc bool
	// wrapStore, if set, replaces the durable storage by a wrapper.
	wrapStore func(storage.Store) storage.Store
	// runFor stops the run after this long (endless inputs).
	runFor time.Duration
	// storage overrides the durable storage URL (default: a fresh local
	// directory); output the output directory (default: a fresh one).
	storage string
	output  string
	// measureOnly skips finishing the sink and reading the output back
	// (benchmarks).
	measureOnly bool
	// stopAtCheckpoint, when positive, stops the run from outside once that
	// many checkpoints are complete, leaving storage as a process dying
	// then would.
	stopAtCheckpoint int
	// stopWhen, if set, stops the run from outside after the first
	// checkpoint event (any status) for which it returns true: a test
	// stops at a recovery point it chose, not after a wall-clock time.
	stopWhen func(CheckpointStats) bool
	// resumed runs the scenario as a --resume process (run.Config.Resumed).
	resumed bool
	// retained overrides --retained-checkpoints (default 2); params the
	// job parameters (default job.DefaultParams).
	retained int
	params   *job.Params
	// trace, if set, records the run's time-space events.
	trace *spacetime.Recorder
	// processes runs the tasks in worker processes (this test binary,
	// --workers process); heartbeatTimeout is then --heartbeat-timeout.
	processes        bool
	heartbeatTimeout time.Duration
}

type result struct {
	summary *report.Summary
	report  *Report
	stats   sink.Stats
	table   *sink.Table
	want    *runtest.Want
	env     *run.Env
	err     error
	storage string
	// ended is how each worker process ended (processes).
	ended []run.ProcEnd
	// logs is what the run logged (read once it ended).
	logs *bytes.Buffer
}

func (sc *scenario) String() string {
	return fmt.Sprintf("%s/%s/%s/p%d fails=%v", sc.job, sc.barriers, sc.mode, sc.parallelism, sc.fails)
}

func (sc *scenario) config(t testing.TB) run.Config {
	t.Helper()
	if sc.parallelism == 0 {
		sc.parallelism = 2
	}
	if sc.mode == "" {
		sc.mode = sink.Idempotent
	}
	if sc.barriers.barriers == "" {
		sc.barriers.barriers = "aligned"
	}
	if sc.interval == 0 {
		sc.interval = 3 * time.Millisecond
	}
	if sc.format == "" {
		sc.format = sink.CSV
	}
	if sc.inputs == nil {
		sc.inputs = inputs(sc.job, 4000, 0, 1)
	}
	if sc.cpTimeout == 0 {
		sc.cpTimeout = 10 * time.Second
	}
	if sc.retained == 0 {
		sc.retained = 2
	}
	p := job.DefaultParams
	if sc.params != nil {
		p = *sc.params
	}
	return run.Config{
		Job: sc.job, Params: p, Executor: "recordwise",
		Options: Options{Barriers: sc.barriers.barriers, AlignmentTimeout: sc.barriers.timeout, CheckpointInterval: sc.interval,
			BufferTimeout: time.Millisecond, CheckpointTimeout: sc.cpTimeout, RetainedCheckpoints: sc.retained},
		DetectDelay: sc.detect, AcquireDelay: sc.acquire,
		Inputs: sc.inputs, Output: sc.outputDir(t), OutputFormat: sc.format, SinkMode: sc.mode, SinkRoll: sc.roll,
		Storage: sc.storageURL(t), Parallelism: sc.parallelism, Fails: sc.fails, Seed: 1, Progress: sc.progress, Resumed: sc.resumed,
		Workers: sc.workers(), HeartbeatTimeout: sc.heartbeatTimeout,
	}
}

func (sc *scenario) workers() run.WorkerMode {
	if sc.processes {
		return run.WorkersProcess
	}
	return run.WorkersInproc
}

func (sc *scenario) outputDir(t testing.TB) string {
	if sc.output != "" {
		return sc.output
	}
	return filepath.Join(fastDir(t), "out")
}

func (sc *scenario) storageURL(t testing.TB) string {
	if sc.storage != "" {
		return sc.storage
	}
	return "file://" + fastDir(t)
}

// execute runs the scenario and resolves the output; it does not judge.
// The checked allocator must be back at zero once everything is closed.
func (sc *scenario) execute(t testing.TB) *result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := sc.config(t)
	// Tests stage transactional rows in tiny chunks, so every epoch has
	// several staged parts; benchmarks keep the default.
	txnChunkRows = 1 << 16
	if !sc.plainAlloc {
		txnChunkRows = 100
	}
	if *flagVerbose && cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	var alloc interface {
		memory.Allocator
		CurrentAlloc() int
	} = memory.NewCheckedAllocator(memory.NewGoAllocator())
	if sc.plainAlloc {
		alloc = &countingAlloc{Allocator: memory.NewGoAllocator()}
	}
	runCtx := ctx
	if sc.stopAtCheckpoint > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithCancel(ctx)
		defer stop()
		cfg.Progress = &runtest.EventStop{W: cfg.Progress, Match: []string{`"event":"checkpoint"`, `"status":"completed"`},
			N: sc.stopAtCheckpoint, Stop: stop}
	}
	if sc.stopWhen != nil {
		var stop context.CancelFunc
		runCtx, stop = context.WithCancel(runCtx)
		defer stop()
		cfg.Progress = &checkpointStop{w: cfg.Progress, when: sc.stopWhen, stop: stop}
	}
	logs := &bytes.Buffer{} // the handler serialises its writes
	log := slog.New(slog.NewTextHandler(logs, nil))
	env, err := run.Prepare(ctx, cfg, alloc, log, true, run.OutputResume)
	if err != nil {
		t.Fatalf("%s: prepare: %v", sc, err)
	}
	if sc.wrapStore != nil {
		env.Store = sc.wrapStore(env.Store)
	}
	env.Trace = sc.trace
	o := &result{env: env, storage: cfg.Storage, logs: logs}
	opts := sc.opts
	if sc.processes {
		env.WorkerCommand = testWorkerCommand()
		opts.hooks.fleet = func(f *run.Fleet) { o.ended = f.Ended() }
	}
	if sc.runFor > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeout(ctx, sc.runFor)
		defer stop()
	}
	o.summary, o.report, o.err = Executor{Options: opts}.RunReport(runCtx, env)
	if o.err == nil && !sc.measureOnly {
		if err := run.Finish(env, o.summary); err != nil {
			t.Fatalf("%s: finish: %v", sc, err)
		}
	}
	if err := env.Close(); err != nil {
		t.Fatalf("%s: closing env: %v", sc, err)
	}
	if n := alloc.CurrentAlloc(); n != 0 {
		t.Fatalf("%s: %d bytes of Arrow memory not released", sc, n)
	}
	if o.err != nil || sc.measureOnly {
		return o
	}
	o.table, o.stats, o.want = runtest.ReadBack(t, env, !sc.noOracle)
	return o
}

// executeRaw runs the scenario without computing the oracle's answer.
func (sc *scenario) executeRaw(t testing.TB) *result {
	sc.noOracle = true
	return sc.execute(t)
}

// judged is the run as runtest judges it: runtest.CheckOutput (the
// resolved output equals the reference's, the idempotent and transactional
// sinks show no duplicate or conflicting row, and the summary's counts are
// what resolving and an independent reader count), then checkRecovered.
func (o *result) judged() runtest.Result {
	return runtest.Result{Outcome: runtest.Outcome{Err: o.err, Env: o.env, Summary: o.summary, Table: o.table, Stats: o.stats, Want: o.want},
		Check: o.checkRecovered}
}

// check judges a result as judged says.
func (o *result) check(t testing.TB, what string) { t.Helper(); o.judged().Judge(t, what) }

// checkRecovered: every crash was recovered from.
func (o *result) checkRecovered(t testing.TB, what string) {
	t.Helper()
	if o.summary.Crashes != len(o.summary.Recoveries) {
		t.Fatalf("%s: %d crashes but %d recoveries", what, o.summary.Crashes, len(o.summary.Recoveries))
	}
}

// checkpointStop passes progress lines on to w (when set) and calls stop
// once when a checkpoint event satisfies when. Executors write one line
// per Write, one at a time.
type checkpointStop struct {
	w       io.Writer
	when    func(CheckpointStats) bool
	stop    func()
	stopped bool
}

func (c *checkpointStop) Write(p []byte) (int, error) {
	var ev struct {
		Event string `json:"event"`
		CheckpointStats
	}
	if !c.stopped && json.Unmarshal(p, &ev) == nil && ev.Event == "checkpoint" && c.when(ev.CheckpointStats) {
		c.stopped = true
		c.stop()
	}
	if c.w == nil {
		return len(p), nil
	}
	return c.w.Write(p)
}

// countingAlloc is the Go allocator without the checked allocator's
// bookkeeping; it reports nothing outstanding.
type countingAlloc struct{ memory.Allocator }

func (countingAlloc) CurrentAlloc() int { return 0 }
