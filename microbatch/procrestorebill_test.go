package microbatch

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// A worker process's replacement reads its key groups' state from
// storage, and the bill says how much (restore_bytes), as a simulated
// worker's restore does: the bytes are read in the worker process, so
// the coordinator's own count alone would bill none.
func TestAWorkerProcessRestoreBillsTheBytesItRead(t *testing.T) {
	sc := procScenario("keyed-count", sink.Transactional, 2400, 3)
	// The third batch: two state versions are committed before it.
	sc.fails = []fault.Spec{{Point: PointMidRun, Worker: 1, OnlyWorker: true, Occurrence: 3}}
	o := sc.execute(t)
	o.check(t, "restore bill")
	o.checkProcs(t, "restore bill", 1)
	var billed bool
	for _, r := range o.summary.Recoveries {
		if r.RestoreBytes == nil || *r.RestoreBytes <= 0 {
			t.Fatalf("recovery %q bills restore bytes %v; want the replacement's key groups' state", r.Cause, r.RestoreBytes)
		}
		billed = true
	}
	if !billed {
		t.Fatal("no recovery billed: the kill did not happen")
	}
}
