package diskphase

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

var scheduleFlags = runtest.NewScheduleFlags("dp", 200)

func TestMain(m *testing.M) {
	if os.Getenv(testWorkerEnv) == "1" {
		os.Exit(runtest.WorkerMain(Executor{})) // this binary, started as a worker process
	}
	runtest.Main(m)
	// runtest.Main exits; an orphan check of the whole package is in
	// TestNoWorkerProcessOutlivesItsRun (process_test.go).
}

// fastDir is a fresh directory, on a RAM disk when there is one.
func fastDir(t testing.TB) string {
	t.Helper()
	return runtest.FastDir(t, "rewind-dp-", false)
}

func smallInputs(jobName string, records int, seed int64) map[string]string {
	return runtest.Gen{Records: records, Keys: 150, JoinKeys: max(records/8, 1), Seed: seed}.Inputs(jobName)
}

// scenario is one run of the executor, judged against the oracle.
type scenario struct {
	job         string
	inputs      map[string]string
	mode        sink.Mode
	parallelism int
	jobRecords  int64
	jobInterval time.Duration
	fails       []fault.Spec
	readBatch   int
	// chunkRows is Options.ChunkRows: 0 is the default, far more rows than
	// a test's units read, so they write one chunk a partition.
	chunkRows  int
	params     *job.Params
	progress   io.Writer
	storage    string
	runID      string
	plainAlloc bool // benchmarks: no checked allocator
	noOracle   bool
	// output overrides the output directory (default: a fresh one).
	output string
	// stopAfterCommits, when positive, stops the run from outside once
	// that many finite jobs are committed and leaves it unfinished, as a
	// process dying then would.
	stopAfterCommits int
	// resumed runs the scenario as a --resume process (run.Config.Resumed).
	resumed bool
	// detect and acquire are the modelled replacement delays.
	detect, acquire time.Duration
	// onTrace sees every trace event, in the coordinator's goroutine (or a
	// unit's, for none of the kinds used here), with the store.
	onTrace func(ev traceEvent, st storage.Store, x *execution)
	// spacetime, if set, records the run's time-space events.
	spacetime *spacetime.Recorder
	// workers is --workers; process starts this test binary as the
	// worker processes (serveTestWorker).
	workers run.WorkerMode
	// heartbeat replaces --heartbeat-timeout.
	heartbeat time.Duration
}

type outcome struct {
	summary *report.Summary
	stats   sink.Stats
	table   *sink.Table
	want    *runtest.Want
	env     *run.Env
	x       *execution
	trace   []traceEvent
	err     error
	left    []string // data objects left in the run's namespace
}

func (sc *scenario) execute(t testing.TB) *outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if sc.parallelism == 0 {
		sc.parallelism = 2
	}
	if sc.mode == "" {
		sc.mode = sink.Transactional
	}
	if sc.storage == "" {
		sc.storage = "file://" + fastDir(t)
	}
	if sc.readBatch == 0 {
		sc.readBatch = 512
	}
	if sc.runID == "" {
		sc.runID = "test"
	}
	p := job.DefaultParams
	if sc.params != nil {
		p = *sc.params
	}
	out := sc.output
	if out == "" {
		out = filepath.Join(fastDir(t), "out")
	}
	cfg := run.Config{Job: sc.job, Params: p, Executor: "diskphase", Inputs: sc.inputs, Output: out,
		OutputFormat: sink.Parquet, SinkMode: sc.mode, Storage: sc.storage, Parallelism: sc.parallelism,
		Options: Options{JobRecords: sc.jobRecords, JobInterval: sc.jobInterval, ChunkRows: sc.chunkRows}, Fails: sc.fails, Seed: 1, Progress: sc.progress,
		Resumed: sc.resumed, DetectDelay: sc.detect, AcquireDelay: sc.acquire, Workers: sc.workers}
	runCtx := ctx
	if sc.stopAfterCommits > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithCancel(ctx)
		defer stop()
		cfg.Progress = &runtest.EventStop{W: cfg.Progress, Match: []string{`"event":"job_committed"`}, N: sc.stopAfterCommits, Stop: stop}
	}
	checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
	var alloc memory.Allocator = checked
	if sc.plainAlloc {
		alloc = memory.NewGoAllocator()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := run.Prepare(ctx, cfg, alloc, log, true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	env.Trace = sc.spacetime
	env.WorkerCommand = testWorkerCommand()
	o := &outcome{env: env}
	var mu sync.Mutex
	e := Executor{RunID: sc.runID, ReadBatchRows: sc.readBatch, heartbeatTimeout: sc.heartbeat,
		trace: func(ev traceEvent) {
			mu.Lock()
			o.trace = append(o.trace, ev)
			mu.Unlock()
		},
		result: func(x *execution) { o.x = x },
	}
	if sc.onTrace != nil {
		e.trace = func(ev traceEvent) {
			// Events come from the coordinator and from workers: the hook
			// runs under the lock.
			mu.Lock()
			defer mu.Unlock()
			o.trace = append(o.trace, ev)
			sc.onTrace(ev, env.Store, o.x)
		}
	}
	o.summary, o.err = e.Run(runCtx, env)
	if o.err == nil && sc.stopAfterCommits == 0 {
		if err := run.Finish(env, o.summary); err != nil {
			t.Fatalf("finish: %v", err)
		}
		objs, err := env.Store.List(ctx, newNames(sc.job, sc.runID).root)
		if err != nil {
			t.Fatal(err)
		}
		for _, ob := range objs {
			if strings.Contains(ob.Name, "/map/") || strings.Contains(ob.Name, "/out/") {
				o.left = append(o.left, ob.Name)
			}
		}
	}
	if err := env.Close(); err != nil {
		t.Fatalf("closing env: %v", err)
	}
	checked.AssertSize(t, 0)
	if sc.workers == run.WorkersProcess {
		checkNoOrphans(t, o.x)
	}
	if o.err != nil || sc.stopAfterCommits > 0 {
		return o
	}
	o.table, o.stats, o.want = runtest.ReadBack(t, env, !sc.noOracle)
	return o
}

// result is the run as runtest judges it: runtest.CheckOutput, then
// checkOutput.
func (o *outcome) result() runtest.Result {
	return runtest.Result{Outcome: runtest.Outcome{Err: o.err, Env: o.env, Summary: o.summary, Table: o.table, Stats: o.stats, Want: o.want},
		Check: o.checkOutput}
}

// checkOutput: the resolved output equals the oracle's.
func (o *outcome) checkOutput(t testing.TB, what string) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("%s: run failed: %v", what, o.err)
	}
	got, want := o.table, o.want.Table
	if !slices.Equal(got.Columns, want.Columns) {
		t.Fatalf("%s: columns %v, want %v", what, got.Columns, want.Columns)
	}
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("%s: %d resolved rows, want %d", what, len(got.Rows), len(want.Rows))
	}
	for i := range got.Rows {
		if !slices.Equal(got.Rows[i], want.Rows[i]) {
			t.Fatalf("%s: resolved row %d is %v, want %v", what, i, got.Rows[i], want.Rows[i])
		}
	}
	if o.summary.LateRows != 0 {
		t.Fatalf("%s: %d late rows with disorder within bounds", what, o.summary.LateRows)
	}
	if len(o.left) > 0 {
		t.Fatalf("%s: materialised files left after the run: %v", what, o.left)
	}
}

// accounting summarises the trace per unit.
type accounting struct {
	starts      map[UnitID]int
	interrupted map[UnitID]int
	lost        map[UnitID]int // re-runs of producers of lost files
	recorded    map[UnitID]int
	crashes     int
}

func (o *outcome) accounting() accounting {
	a := accounting{starts: map[UnitID]int{}, interrupted: map[UnitID]int{}, lost: map[UnitID]int{}, recorded: map[UnitID]int{}}
	for _, ev := range o.trace {
		switch ev.Kind {
		case "start":
			a.starts[ev.Unit]++
		case "interrupted", "abandoned":
			a.interrupted[ev.Unit]++
		case "lost":
			a.lost[ev.Unit]++
		case "recorded":
			a.recorded[ev.Unit]++
		case "crash":
			a.crashes++
		}
	}
	return a
}

// checkReruns: every unit ran exactly once more than the times it was
// interrupted (or its files were lost), the executor's own count agrees,
// and with no lost files no unit was recorded twice — so no crash ever
// re-ran work the ledger already held.
func (o *outcome) checkReruns(t testing.TB, what string) {
	t.Helper()
	a := o.accounting()
	reruns := 0
	for u, n := range a.starts {
		want := 1 + a.interrupted[u] + a.lost[u]
		if n != want {
			t.Fatalf("%s: unit %s started %d times, interrupted %d times, lost %d times", what, u, n, a.interrupted[u], a.lost[u])
		}
		reruns += n - 1
		if a.recorded[u] != 1+a.lost[u] {
			t.Fatalf("%s: unit %s recorded %d times (files lost %d times)", what, u, a.recorded[u], a.lost[u])
		}
	}
	m := o.x.met
	if m.unitsRe != reruns || m.unitsRe != m.interrupt+m.lossRuns {
		t.Fatalf("%s: executor counts %d re-runs (%d interrupted, %d lost), the trace %d", what, m.unitsRe, m.interrupt, m.lossRuns, reruns)
	}
	if fired := len(o.env.Faults.Fired); o.summary.Crashes != fired || a.crashes != fired {
		t.Fatalf("%s: summary counts %d crashes, trace %d, injector fired %d", what, o.summary.Crashes, a.crashes, fired)
	}
}

func (o *outcome) checkNoDuplicates(t testing.TB, what string) {
	t.Helper()
	if o.stats.DuplicateRows != 0 || o.summary.SinkDuplicateRows != 0 {
		t.Fatalf("%s: %d duplicate rows visible", what, o.stats.DuplicateRows)
	}
}
