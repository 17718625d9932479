package diskphase

import (
	"slices"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// checkModelled asserts the one recovery of o bills the modelled detect
// (>= 200 ms) and acquire (>= 100 ms) and a crash at or after minAt.
func checkModelled(t *testing.T, what string, o *outcome, minAt float64) report.Recovery {
	t.Helper()
	if len(o.summary.Recoveries) != 1 {
		t.Fatalf("%s: %d recoveries, want 1: %+v", what, len(o.summary.Recoveries), o.summary.Recoveries)
	}
	r := o.summary.Recoveries[0]
	if r.DetectMs == nil || *r.DetectMs < 200 || r.AcquireMs == nil || *r.AcquireMs < 100 || !slices.Equal(r.Modelled, []string{"detect", "acquire"}) {
		t.Fatalf("%s: bill %+v: want detect >= 200 ms, acquire >= 100 ms, both modelled", what, r)
	}
	if r.AtMs == nil || *r.AtMs < minAt {
		t.Fatalf("%s: at_ms %v, want >= %v", what, r.AtMs, minAt)
	}
	return r
}

// TestTimedKillModelledReplacement: a worker killed at a time, with the
// heartbeat timeout and the replacement modelled, bills both as modelled
// figures; the ledger stays in the coordinator's memory, so nothing is
// read back (restore_bytes 0, measured, not null); the output is exact.
func TestTimedKillModelledReplacement(t *testing.T) {
	inputs := runtest.Gen{Records: 30000, Keys: 200, Seed: 23, Rate: 100000}.Inputs("keyed-count")
	sc := &scenario{job: "keyed-count", inputs: inputs, jobRecords: 1500, mode: sink.Idempotent,
		fails: []fault.Spec{{Worker: 0, At: 100 * time.Millisecond}}, detect: 200 * time.Millisecond, acquire: 100 * time.Millisecond}
	o := sc.execute(t)
	o.checkOutput(t, "timed kill")
	if p := o.env.Faults.Pending(); len(p) > 0 {
		t.Fatalf("the timed kill never fired: %v", p)
	}
	if r := checkModelled(t, "timed kill", o, 100); r.RestoreBytes == nil || *r.RestoreBytes != 0 {
		t.Fatalf("a worker kill's restore_bytes is %v, want 0: the ledger is in memory", r.RestoreBytes)
	}
}

// TestCoordinatorRestartModelledReplacement: a crashed coordinator is
// replaced the same way, and its restart reads the ledger back from
// storage (restore_bytes > 0).
func TestCoordinatorRestartModelledReplacement(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 3000, 5), jobRecords: 1000, mode: sink.Idempotent,
		fails:  []fault.Spec{{Worker: -1, Point: pointAfterCommit, Occurrence: 1}},
		detect: 200 * time.Millisecond, acquire: 100 * time.Millisecond}
	o := sc.execute(t)
	o.checkOutput(t, "coordinator crash")
	r := checkModelled(t, "coordinator crash", o, 0)
	if r.RestoreBytes == nil || *r.RestoreBytes <= 0 || r.RestoreMs == nil {
		t.Fatalf("restore %v ms, %v bytes; want the ledger read back", r.RestoreMs, r.RestoreBytes)
	}
}
