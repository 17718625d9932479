package microbatch

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
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
// the worker processes (the hash exchanges relayed by the coordinator),
// and the output equals the oracle's.
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
			})
		}
	}
}
