package diskphase

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// testWorkerEnv makes this test binary serve as a worker process.
const testWorkerEnv = "REWIND_DISKPHASE_TEST_WORKER"

// testWorkerCommand starts this test binary as `rewind worker` would run
// (runtest.WorkerCommand); its main is runtest.WorkerMain.
func testWorkerCommand() *run.WorkerCommand { return runtest.WorkerCommand(testWorkerEnv) }

// checkNoOrphans: every worker process the run started is gone, and none
// ended by itself with an error (a worker's leak check among them).
func checkNoOrphans(t testing.TB, x *execution) {
	t.Helper()
	if x == nil || x.procs == nil {
		t.Fatal("a run with --workers process started no worker processes")
	}
	runtest.CheckNoOrphans(t, x.procs.Ended())
}

// sigkilled counts the run's worker processes a SIGKILL ended.
func sigkilled(x *execution) int {
	n := 0
	for _, e := range x.procs.Ended() {
		if e.Signal == syscall.SIGKILL {
			n++
		}
	}
	return n
}

// checkMeasuredBill: every recovery of a worker death has a measured
// detect and acquire, not modelled ones.
func checkMeasuredBill(t testing.TB, o *outcome, what string) {
	t.Helper()
	n := 0
	for _, r := range o.summary.Recoveries {
		if !strings.Contains(r.Cause, "worker") {
			continue
		}
		n++
		if r.DetectMs == nil || r.AcquireMs == nil || *r.AcquireMs <= 0 || len(r.Modelled) != 0 {
			t.Fatalf("%s: recovery %q bills detect %v, acquire %v, modelled %v: want both measured", what, r.Cause, r.DetectMs, r.AcquireMs, r.Modelled)
		}
	}
	if n == 0 {
		t.Fatalf("%s: no worker recovery billed", what)
	}
}

// TestProcessWorkersMatchTheOracle runs each job with worker processes and
// no crash, in every sink mode.
func TestProcessWorkersMatchTheOracle(t *testing.T) {
	for _, name := range []string{"keyed-count", "join", "windowed-sum"} {
		for _, mode := range []sink.Mode{sink.Transactional, sink.Idempotent, sink.Append} {
			what := fmt.Sprintf("%s/%s", name, mode)
			t.Run(what, func(t *testing.T) {
				t.Parallel()
				sc := &scenario{job: name, inputs: smallInputs(name, 3000, 3), jobRecords: 1500, mode: mode, workers: run.WorkersProcess}
				o := sc.execute(t)
				o.checkOutput(t, what)
				o.checkNoDuplicates(t, what)
				if got := len(o.x.procs.Ended()); got != sc.parallelism {
					t.Fatalf("%s: %d worker processes started, want %d (one per worker)", what, got, sc.parallelism)
				}
				if w := o.summary.Workers; w == nil || w.Started != sc.parallelism || w.LinkRows != 0 {
					t.Fatalf("%s: the summary's workers %+v; want %d processes and no rows between them", what, w, sc.parallelism)
				}
				if o.summary.Crashes != 0 || sigkilled(o.x) != 0 {
					t.Fatalf("%s: %d crashes, %d processes SIGKILLed in a run without faults", what, o.summary.Crashes, sigkilled(o.x))
				}
			})
		}
	}
}

// TestSIGKILLedWorkerProcesses kills worker processes at seeded moments:
// once, a worker and then its replacement, and a second kill while the
// first recovery is still open; the resolved output equals the oracle's, idempotent and
// transactional show no duplicate, append's are counted exactly, every kill is a real SIGKILL, and the
// bill's detect and acquire are measured.
func TestSIGKILLedWorkerProcesses(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 17))
	type kase struct {
		name  string
		fails []fault.Spec
		kills int
	}
	n1 := 1 + r.Int64N(2500)
	w, k := r.IntN(2), 1+r.IntN(4)
	cases := []kase{
		{"once", []fault.Spec{{Worker: w, AfterRecords: n1}}, 1},
		// Worker w dies at its first unit, and its replacement at the
		// replacement's first. (By record counts the second kill can land
		// before the replacement exists, on a worker already down: one
		// death, as in process.)
		{"twice-in-a-row", []fault.Spec{{Point: pointMidRead, Occurrence: 1, Worker: w, OnlyWorker: true},
			{Point: pointMidRead, Occurrence: 2, Worker: w, OnlyWorker: true}}, 2},
		// Both land inside a unit; the second at the next unit to reach
		// the point, before the first's unit is re-run to the ledger
		// (its re-run passes the point first).
		{"during-recovery", []fault.Spec{{Point: pointMidRead, Occurrence: k, Worker: -1}, {Point: pointMidRead, Occurrence: k + 1, Worker: -1}}, 2},
		{"at-a-point", []fault.Spec{{Point: pointMidWrite, Occurrence: 1 + r.IntN(4), Worker: -1}}, 1},
	}
	for _, c := range cases {
		for _, mode := range []sink.Mode{sink.Append, sink.Idempotent, sink.Transactional} {
			what := fmt.Sprintf("%s/%s/%v", c.name, mode, c.fails)
			t.Run(c.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 4000, int64(seed%1000)), jobRecords: 2000,
					mode: mode, fails: c.fails, workers: run.WorkersProcess}
				o := sc.execute(t)
				o.checkOutput(t, what)
				if mode == sink.Append {
					// Append may show a row twice; the summary must count
					// exactly what an independent reader counts.
					if o.summary.SinkDuplicateRows != o.stats.DuplicateRows {
						t.Fatalf("%s: the summary reports %d duplicate rows, resolving the output counts %d", what, o.summary.SinkDuplicateRows, o.stats.DuplicateRows)
					}
				} else {
					o.checkNoDuplicates(t, what)
				}
				o.checkReruns(t, what)
				if got := len(o.env.Faults.Fired); got != c.kills {
					t.Fatalf("%s: %d of %d kills fired", what, got, c.kills)
				}
				if got := sigkilled(o.x); got < c.kills {
					t.Fatalf("%s: %d worker processes ended by SIGKILL, want at least %d", what, got, c.kills)
				}
				checkMeasuredBill(t, o, what)
				if c.name == "during-recovery" {
					checkSecondCrashInsideFirstRecovery(t, o, what)
				}
			})
		}
	}
}

// TestWorkerProcessDyingOnItsOwn kills a worker process from outside the
// coordinator (as the OOM killer would) while it runs a unit: the broken
// connection is its death, billed and recovered like an injected kill.
func TestWorkerProcessDyingOnItsOwn(t *testing.T) {
	killed := false
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 3000, 7), jobRecords: 1500, mode: sink.Transactional,
		workers: run.WorkersProcess,
		onTrace: func(ev traceEvent, _ storage.Store, x *execution) {
			if ev.Kind == "start" && ev.Unit.Kind == kindMap && ev.Unit.Job == 1 && !killed {
				killed = true
				if err := syscall.Kill(x.procs.Current(ev.Worker).Pid(), syscall.SIGKILL); err != nil {
					t.Errorf("killing worker %d from outside: %v", ev.Worker, err)
				}
			}
		}}
	o := sc.execute(t)
	if !killed {
		t.Fatal("no map unit of job 1 started: nothing was killed")
	}
	o.checkOutput(t, "died on its own")
	o.checkNoDuplicates(t, "died on its own")
	if o.summary.Crashes != 1 || sigkilled(o.x) != 1 {
		t.Fatalf("a worker process killed from outside: %d crashes billed, %d processes SIGKILLed; want 1 and 1", o.summary.Crashes, sigkilled(o.x))
	}
	if rs := o.summary.Recoveries; len(rs) != 1 || !strings.Contains(rs[0].Cause, "process is lost") || rs[0].AcquireMs == nil || *rs[0].AcquireMs <= 0 {
		t.Fatalf("recoveries %+v: want one for the process that died, with its acquire measured", rs)
	}
}

// TestWorkerProcessesDyingAtEveryAttemptFailTheRun: a worker process
// killed from outside at the start of every attempt is replaced maxLost
// times, and then the run fails with the reason instead of looping.
func TestWorkerProcessesDyingAtEveryAttemptFailTheRun(t *testing.T) {
	kills := 0
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 1000, 9), mode: sink.Idempotent, parallelism: 1,
		workers: run.WorkersProcess,
		onTrace: func(ev traceEvent, _ storage.Store, x *execution) {
			if ev.Kind == "start" {
				kills++
				if err := syscall.Kill(x.procs.Current(ev.Worker).Pid(), syscall.SIGKILL); err != nil {
					t.Errorf("killing worker %d from outside: %v", ev.Worker, err)
				}
			}
		}}
	o := sc.execute(t)
	if o.err == nil || !strings.Contains(o.err.Error(), "died on their own") {
		t.Fatalf("run error %v after %d kills; want it to give up on worker processes dying on their own", o.err, kills)
	}
	if kills != maxLost+1 {
		t.Fatalf("%d attempts killed before giving up, want %d", kills, maxLost+1)
	}
}

// TestFrozenWorkerProcessIsDeclaredDead SIGSTOPs a worker process while
// it runs a unit: its connection never breaks, its missing heartbeats
// declare it dead, and it is killed and replaced.
func TestFrozenWorkerProcessIsDeclaredDead(t *testing.T) {
	frozen := false
	var at time.Time
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 3000, 8), jobRecords: 1500, mode: sink.Idempotent,
		workers: run.WorkersProcess, heartbeat: time.Second,
		onTrace: func(ev traceEvent, _ storage.Store, x *execution) {
			if ev.Kind == "start" && ev.Unit.Kind == kindMap && ev.Unit.Job == 1 && !frozen {
				frozen, at = true, time.Now()
				if err := syscall.Kill(x.procs.Current(ev.Worker).Pid(), syscall.SIGSTOP); err != nil {
					t.Errorf("freezing worker %d: %v", ev.Worker, err)
				}
			}
		}}
	o := sc.execute(t)
	if !frozen {
		t.Fatal("no map unit of job 1 started: nothing was frozen")
	}
	o.checkOutput(t, "frozen")
	o.checkNoDuplicates(t, "frozen")
	rs := o.summary.Recoveries
	if len(rs) != 1 || !strings.Contains(rs[0].Cause, "silent") {
		t.Fatalf("recoveries %+v: want one for the silent worker", rs)
	}
	if sigkilled(o.x) != 1 {
		t.Fatalf("%d worker processes SIGKILLed, want the frozen one", sigkilled(o.x))
	}
	if d := o.env.Begin().Add(time.Duration(*rs[0].AtMs * float64(time.Millisecond))).Sub(at); d < time.Second {
		t.Fatalf("declared dead %s after it froze, before the 1s heartbeat timeout", d)
	}
}

// TestCoordinatorCrashKeepsWorkerProcesses: a coordinator crash abandons
// its attempts (the workers are told to cancel), and the next coordinator
// runs on the same worker processes.
func TestCoordinatorCrashKeepsWorkerProcesses(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 4000, 19), jobRecords: 2000, mode: sink.Idempotent,
		fails: []fault.Spec{{Point: pointAfterRecord, Occurrence: 3, Worker: -1}}, workers: run.WorkersProcess}
	o := sc.execute(t)
	o.checkOutput(t, "coordinator crash")
	o.checkNoDuplicates(t, "coordinator crash")
	o.checkReruns(t, "coordinator crash")
	if len(o.env.Faults.Fired) != 1 {
		t.Fatal("the coordinator crash did not fire")
	}
	if got := len(o.x.procs.Ended()); got != sc.parallelism || sigkilled(o.x) != 0 {
		t.Fatalf("a coordinator crash: %d worker processes started (%d SIGKILLed), want the first %d kept", got, sigkilled(o.x), sc.parallelism)
	}
}

// TestNoWorkerProcessOutlivesItsRun runs last in this file's order: no
// process this test binary started is still alive.
func TestNoWorkerProcessOutlivesItsRun(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 2000, 1), mode: sink.Idempotent,
		fails: []fault.Spec{{Worker: 0, AfterRecords: 500}}, workers: run.WorkersProcess}
	o := sc.execute(t)
	o.checkOutput(t, "orphans")
	deadline := time.Now().Add(5 * time.Second)
	for {
		kids := runtest.ChildrenOf(os.Getpid())
		if len(kids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still alive after the run: %v", kids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSecondCrashInsideFirstRecovery: the second crash came before the
// unit the first one interrupted was in the ledger again, which is when
// the first recovery ends. Events are taken in the order of their stamps,
// not of their tracing: a crash is traced once it is detected and its
// replacement started, but stamped at the death, so a unit recorded in
// between was traced first though it ended after the crash.
func checkSecondCrashInsideFirstRecovery(t testing.TB, o *outcome, what string) {
	t.Helper()
	crashes, first := 0, UnitID{}
	interrupted := false
	evs := slices.Clone(o.trace)
	slices.SortStableFunc(evs, func(a, b traceEvent) int { return a.At.Compare(b.At) })
	for _, ev := range evs {
		switch {
		case ev.Kind == "crash":
			crashes++
			if crashes == 2 {
				if !interrupted {
					t.Fatalf("%s: the first crash interrupted no unit before the second", what)
				}
				return
			}
		case ev.Kind == "interrupted" && crashes == 1 && !interrupted:
			first, interrupted = ev.Unit, true
		case ev.Kind == "recorded" && interrupted && ev.Unit == first:
			t.Fatalf("%s: %s, interrupted by the first crash, was recorded again before the second crash: not inside a recovery", what, first)
		}
	}
	t.Fatalf("%s: %d crashes in the trace, want 2", what, crashes)
}
