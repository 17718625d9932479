package diskphase

import (
	"fmt"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// A worker process killed after its attempt's files are durable, and
// before its ledger entry, took its done message with it; the files it
// materialised still count, as a simulated worker's do. The same run
// inproc and in process mode materialises the same files and bytes (the
// units and their contents do not depend on where they ran), and the
// killed attempt's share is in both.
func TestAKilledWorkerProcessesFilesAreCounted(t *testing.T) {
	fails := []fault.Spec{{Point: pointBeforeLedger, Occurrence: 1, Worker: 1, OnlyWorker: true}}
	got := map[run.WorkerMode][2]int64{}
	for _, workers := range []run.WorkerMode{run.WorkersInproc, run.WorkersProcess} {
		sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 4000, 5), jobRecords: 2000,
			mode: sink.Transactional, fails: fails, workers: workers}
		o := sc.execute(t)
		what := fmt.Sprintf("%s %v", workers, fails)
		o.checkOutput(t, what)
		if len(o.env.Faults.Fired) != 1 {
			t.Fatalf("%s: %d kills fired, want 1", what, len(o.env.Faults.Fired))
		}
		got[workers] = [2]int64{int64(o.x.met.filesMat), o.x.met.bytesMat}
	}
	in, pr := got[run.WorkersInproc], got[run.WorkersProcess]
	if in != pr {
		t.Fatalf("materialised files, bytes: inproc %v, process %v; a killed attempt's share is lost in one of them", in, pr)
	}
}
