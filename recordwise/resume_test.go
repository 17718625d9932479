package recordwise

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestResumedProcessBillsTheEarlierDeath: a process stopped once its first
// periodic checkpoint is complete (not after a count of them: a loaded
// machine may complete only the final one before the paced input ends),
// and one resuming its run (run.Config.Resumed):
// the second bills the first's death as its one crash and says which
// checkpoint it resumed from, and its records_in and that checkpoint's
// source positions add up to the input once. A resumed run whose storage
// holds nothing resumes from no checkpoint, covering nothing.
func TestResumedProcessBillsTheEarlierDeath(t *testing.T) {
	const records = 4000
	in := inputs("keyed-count", records, 4000, 5) // one second of input
	store, out := "file://"+fastDir(t), filepath.Join(fastDir(t), "out")
	first := &scenario{job: "keyed-count", mode: sink.Transactional, inputs: in, storage: store, output: out,
		stopWhen: func(cs CheckpointStats) bool { return cs.Status == "completed" && !cs.Final }, measureOnly: true}
	first.opts.RunID = "resumed-bill"
	if o := first.executeRaw(t); o.err != nil {
		t.Fatal(o.err)
	} else if o.summary.Checkpoints.Completed == 0 {
		t.Fatal("the first process completed no checkpoint")
	}
	var progress bytes.Buffer
	second := &scenario{job: "keyed-count", mode: sink.Transactional, inputs: in, storage: store, output: out,
		resumed: true, progress: &progress}
	second.opts.RunID = "resumed-bill"
	o := second.execute(t)
	o.check(t, "resumed process")
	runtest.CheckResumedBill(t, "resumed process", o.summary, "checkpoint", true, records)
	runtest.CheckResumedEvent(t, "resumed process", progress.Bytes(), "recovery", "checkpoint")

	fresh := &scenario{job: "keyed-count", mode: sink.Transactional, inputs: inputs("keyed-count", records, 0, 5), resumed: true}
	fresh.opts.RunID = "nothing-stored"
	o = fresh.execute(t)
	o.check(t, "resumed process, empty storage")
	runtest.CheckResumedBill(t, "resumed process, empty storage", o.summary, "checkpoint", false, records)
}
