package microbatch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/testseed"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// procScenario is a small run with worker processes: several batches
// (MaxBatchRecords), even plans so every batch takes a piece of every
// partition.
func procScenario(jobName string, mode sink.Mode, records int, seed int64) *scenario {
	o := Options{MaxBatchRecords: int64(records / 6)}
	o.hooks.evenPlans = true
	return &scenario{job: jobName, inputs: defaultInputs(jobName, records, seed), mode: mode, parallelism: 2,
		workers: run.WorkersProcess, opts: o}
}

// checkProcs: every process the run started is gone, none ended badly (a
// worker's checked allocator not at zero exits 3), and kills of them
// ended by SIGKILL; it returns how many.
func (o *outcome) checkProcs(t testing.TB, what string, kills int) {
	t.Helper()
	if o.procs == nil {
		t.Fatalf("%s: a run with --workers process started no worker processes", what)
	}
	ended := o.procs.fleet.Ended()
	if got := runtest.CheckNoOrphans(t, ended); got != kills {
		t.Fatalf("%s: %d of %d worker processes ended by SIGKILL, want %d", what, got, len(ended), kills)
	}
	if len(ended) != 2+kills {
		t.Fatalf("%s: %d worker processes, want %d (2 and a replacement per kill)", what, len(ended), 2+kills)
	}
	for _, e := range ended {
		if e.Signal != 0 && e.Signal != syscall.SIGKILL {
			t.Fatalf("%s: worker %d (pid %d) ended by %v", what, e.ID, e.Pid, e.Signal)
		}
	}
}

// checkMeasuredBill: every recovery of a worker's death has a measured
// detect and acquire, not modelled ones.
func (o *outcome) checkMeasuredBill(t testing.TB, what string, want int) {
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
	if n != want {
		t.Fatalf("%s: %d worker recoveries billed, want %d", what, n, want)
	}
}

// TestProcessWorkersMatchTheOracle runs each job with its workers as
// processes and no crash, in every sink mode: the batches' stages run in
// the worker processes (the hash exchanges straight from one to another,
// never through the coordinator), and the output equals the oracle's.
func TestProcessWorkersMatchTheOracle(t *testing.T) {
	for _, name := range []string{"keyed-count", "join", "windowed-sum"} {
		for _, mode := range []sink.Mode{sink.Transactional, sink.Idempotent, sink.Append} {
			what := fmt.Sprintf("%s/%s", name, mode)
			t.Run(what, func(t *testing.T) {
				t.Parallel()
				o := procScenario(name, mode, 2400, 3).execute(t)
				o.check(t, what)
				o.checkProcs(t, what, 0)
				if o.summary.Checkpoints.Completed < 3 {
					t.Fatalf("%s: %d batches, want several", what, o.summary.Checkpoints.Completed)
				}
				if w := o.summary.Workers; w == nil || w.LinkRows <= 0 || w.Started != 2 {
					t.Fatalf("%s: the summary's workers %+v; want 2 processes, and the hash exchanges' rows gone from one to another", what, w)
				}
			})
		}
	}
}

// TestSIGKILLedWorkerProcesses kills worker processes at seeded moments:
// after a record count, inside a seeded batch, a worker and then its
// replacement in the batch's re-run, and the other worker while the first
// recovery is under way (its replacements in place, not yet run). In
// every sink mode the resolved output equals the oracle's, idempotent and
// transactional show no duplicate and append's are counted exactly, every
// kill is a real SIGKILL, and the bill's detect and acquire are measured.
func TestSIGKILLedWorkerProcesses(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 17))
	const records = 2400
	type kase struct {
		name  string
		fails []fault.Spec
		kills int
		// other kills the other worker at the first repair's "replaced"
		// stage (a kill during a recovery).
		other bool
	}
	w, k := r.IntN(2), 1+r.IntN(3)
	cases := []kase{
		{"after-records", []fault.Spec{{Worker: w, AfterRecords: 1 + r.Int64N(records)}}, 1, false},
		{"at-a-seeded-batch", []fault.Spec{{Point: PointMidRun, Worker: w, OnlyWorker: true, Occurrence: k}}, 1, false},
		{"twice-in-a-row", []fault.Spec{{Point: PointMidRun, Worker: w, OnlyWorker: true, Occurrence: k},
			{Point: PointMidRun, Worker: w, OnlyWorker: true, Occurrence: k + 1}}, 2, false},
		{"during-recovery", []fault.Spec{{Point: PointMidRun, Worker: w, OnlyWorker: true, Occurrence: k}}, 2, true},
	}
	for _, c := range cases {
		for _, mode := range []sink.Mode{sink.Idempotent, sink.Transactional, sink.Append} {
			what := fmt.Sprintf("%s/%s/%v (seed %d: go test ./microbatch -run 'TestSIGKILLedWorkerProcesses' -seed %d)", c.name, mode, c.fails, seed, seed)
			t.Run(c.name+"/"+string(mode), func(t *testing.T) {
				t.Parallel()
				sc := procScenario("keyed-count", mode, records, int64(seed%1000))
				sc.fails = c.fails
				if c.other {
					once := false
					sc.opts.hooks.onRepair = func(stage string, kill func(int)) {
						if stage == "replaced" && !once {
							once = true
							kill(1 - w)
						}
					}
				}
				o := sc.execute(t)
				o.check(t, what)
				if got := len(o.env.Faults.Fired); got != len(c.fails) {
					t.Fatalf("%s: %d of %d kills fired", what, got, len(c.fails))
				}
				o.checkProcs(t, what, c.kills)
				o.checkMeasuredBill(t, what, c.kills)
			})
		}
	}
}

// TestWorkerProcessDyingOnItsOwn kills a worker process from outside the
// coordinator (as the OOM killer would) as its third batch starts: the
// broken connection is its death, billed and recovered like a kill.
func TestWorkerProcessDyingOnItsOwn(t *testing.T) {
	sc := procScenario("keyed-count", sink.Transactional, 2400, 7)
	var o *outcome
	killed := false
	sc.opts.hooks.onRun = func(e offsetsEntry, _ bool) {
		if e.Batch == 2 && !killed {
			killed = true
			if err := syscall.Kill(o.procs.fleet.Current(1).Pid(), syscall.SIGKILL); err != nil {
				t.Errorf("killing worker 1 from outside: %v", err)
			}
		}
	}
	o = &outcome{}
	sc.opts.hooks.onProcs = func(pr *procRun) { o.procs = pr }
	got := sc.execute(t)
	got.procs = o.procs
	got.check(t, "killed from outside")
	if !killed {
		t.Fatal("batch 2 never ran")
	}
	got.checkProcs(t, "killed from outside", 1)
	got.checkMeasuredBill(t, "killed from outside", 1)
	if c := got.summary.Recoveries[0].Cause; !strings.Contains(c, "died on its own") {
		t.Fatalf("the recovery's cause is %q, want a death on its own", c)
	}
}

// TestCoordinatorCrashReplacesTheWorkerProcesses crashes the coordinator
// between a batch's state and its commit entry: the worker processes
// hold that coordinator's memory (operators past the commit, read-ahead),
// so both are SIGKILLed and replaced, and the next coordinator restores
// them from storage; the output equals the oracle's.
func TestCoordinatorCrashReplacesTheWorkerProcesses(t *testing.T) {
	for _, mode := range []sink.Mode{sink.Idempotent, sink.Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			sc := procScenario("keyed-count", mode, 2400, 5)
			sc.fails = []fault.Spec{{Point: PointAfterState, Occurrence: 2, Worker: fault.Coordinator}}
			o := sc.execute(t)
			o.check(t, "coordinator crash")
			if len(o.env.Faults.Fired) != 1 {
				t.Fatalf("%d of 1 crashes fired", len(o.env.Faults.Fired))
			}
			o.checkProcs(t, "coordinator crash", 2)
		})
	}
}

// TestFrozenWorkerProcessIsDeclaredDead freezes a worker process
// (SIGSTOP) as its third batch starts: with a 600 ms heartbeat timeout it
// is declared dead by its silence, SIGKILLed before its replacement
// starts, billed (as a death on its own: its detect is 0, since the
// moment it froze is not known), and the batch runs again; the output
// equals the oracle's.
func TestFrozenWorkerProcessIsDeclaredDead(t *testing.T) {
	sc := procScenario("keyed-count", sink.Idempotent, 2400, 9)
	sc.heartbeatTimeout = 600 * time.Millisecond
	var procs *procRun
	frozen := false
	sc.opts.hooks.onProcs = func(pr *procRun) { procs = pr }
	sc.opts.hooks.onRun = func(e offsetsEntry, _ bool) {
		if e.Batch == 2 && !frozen {
			frozen = true
			if err := syscall.Kill(procs.fleet.Current(1).Pid(), syscall.SIGSTOP); err != nil {
				t.Errorf("freezing worker 1: %v", err)
			}
		}
	}
	o := sc.execute(t)
	o.check(t, "frozen")
	if !frozen {
		t.Fatal("batch 2 never ran")
	}
	o.checkProcs(t, "frozen", 1) // the frozen one, SIGKILLed before its replacement
	o.checkMeasuredBill(t, "frozen", 1)
	// Declared dead by its silence, not by a broken connection.
	if c := o.summary.Recoveries[0].Cause; !strings.Contains(c, wire.ErrPeerSilent.Error()) {
		t.Fatalf("the recovery's cause is %q, want the heartbeat timeout", c)
	}
}
