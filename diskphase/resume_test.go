package diskphase

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/runtest"
)

// TestResumedProcessBillsTheEarlierDeath: a process stopped once two finite
// jobs are committed, and one resuming its run (run.Config.Resumed): the
// second bills the first's death as its one crash and says which finite
// job it resumed from, and its records_in and the records of the finished
// map units in the ledger add up to the input once. A resumed run whose
// storage holds nothing resumes from no finite job, covering nothing.
func TestResumedProcessBillsTheEarlierDeath(t *testing.T) {
	const records = 4000
	in := runtest.Gen{Records: records, Keys: 150, Seed: 5, Rate: 8000}.Inputs("keyed-count")
	store, out := "file://"+fastDir(t), filepath.Join(fastDir(t), "out")
	first := &scenario{job: "keyed-count", inputs: in, storage: store, output: out, runID: "resumed-bill",
		jobRecords: 500, stopAfterCommits: 2}
	if o := first.execute(t); o.err != nil {
		t.Fatal(o.err)
	} else if o.summary.Checkpoints.Completed < 2 {
		t.Fatalf("the first process committed %d finite jobs, want 2 or more", o.summary.Checkpoints.Completed)
	}
	var progress bytes.Buffer
	second := &scenario{job: "keyed-count", inputs: in, storage: store, output: out, runID: "resumed-bill",
		jobRecords: 500, resumed: true, progress: &progress}
	o := second.execute(t)
	o.checkOutput(t, "resumed process")
	runtest.CheckResumedBill(t, "resumed process", o.summary, "finite job", true, records)
	runtest.CheckResumedEvent(t, "resumed process", progress.Bytes(), "coordinator_restarted", "finite job")

	fresh := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", records, 5), runID: "nothing-stored",
		jobRecords: 500, resumed: true}
	o = fresh.execute(t)
	o.checkOutput(t, "resumed process, empty storage")
	runtest.CheckResumedBill(t, "resumed process, empty storage", o.summary, "finite job", false, records)
}
