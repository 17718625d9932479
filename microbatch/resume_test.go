package microbatch

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/runtest"
)

// TestResumedProcessBillsTheEarlierDeath: a process that dies after
// committing batches (a crash with no restart) and one resuming its run
// (run.Config.Resumed): the second bills the first's death as its one
// crash and says which batch it resumed from, and its records_in and that
// batch's offsets add up to the input once. A resumed run whose storage
// holds nothing resumes from no batch, covering nothing.
func TestResumedProcessBillsTheEarlierDeath(t *testing.T) {
	const records = 4000
	inputs := defaultInputs("keyed-count", records, 5)
	storage, output := "file://"+fastDir(t), filepath.Join(fastDir(t), "out")
	first := &scenario{job: "keyed-count", inputs: inputs, storage: storage, output: output,
		fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: 3}},
		opts:  Options{MaxBatchRecords: 400, RunID: "resumed-bill"}}
	first.opts.hooks.noRestart = true
	if o := first.execute(t); o.err == nil {
		t.Fatal("first process: want the injected crash to end it")
	}
	var progress bytes.Buffer
	second := &scenario{job: "keyed-count", inputs: inputs, storage: storage, output: output, resumed: true,
		progress: &progress, opts: Options{MaxBatchRecords: 400, RunID: "resumed-bill"}}
	o := second.execute(t)
	o.check(t, "resumed process")
	runtest.CheckResumedBill(t, "resumed process", o.summary, "batch", true, records)
	runtest.CheckResumedEvent(t, "resumed process", progress.Bytes(), "recovery", "batch")

	fresh := &scenario{job: "keyed-count", inputs: inputs, resumed: true, opts: Options{MaxBatchRecords: 400, RunID: "nothing-stored"}}
	o = fresh.execute(t)
	o.check(t, "resumed process, empty storage")
	runtest.CheckResumedBill(t, "resumed process, empty storage", o.summary, "batch", false, records)
}
