package microbatch

import (
	"sync/atomic"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestBackToBackBatchesPollAnIdleSource: with a trigger of 0 the batches
// run back to back and the output equals the reference's; over a paced
// input, which leaves the source idle between records most of the time,
// the coordinator plans at most once per IdlePoll while idle instead of
// spinning on empty plans.
func TestBackToBackBatchesPollAnIdleSource(t *testing.T) {
	var ticks atomic.Int64
	sc := &scenario{job: "keyed-count", mode: sink.Idempotent, backToBack: true,
		inputs: runtest.Gen{Records: 30, Keys: 20, Seed: 3, Rate: 50}.Inputs("keyed-count")}
	sc.opts.hooks.onTick = func() { ticks.Add(1) }
	o := sc.execute(t)
	o.check(t, "back to back over a paced input")
	batches := int64(o.summary.Checkpoints.Completed)
	idleBound := int64(o.summary.WallMs/float64(IdlePoll.Milliseconds())) + 1
	n := ticks.Load()
	t.Logf("%d triggers, %d batches in %.0f ms", n, batches, o.summary.WallMs)
	if n > idleBound+batches+5 {
		t.Fatalf("%d triggers in %.0f ms for %d batches: more than one per %s while idle (at most %d): the coordinator spins on empty plans",
			n, o.summary.WallMs, batches, IdlePoll, idleBound+batches+5)
	}
	// A record every 20 ms and a batch in a few: most plans find nothing.
	if n < batches+10 {
		t.Fatalf("%d triggers for %d batches: the source was never idle, so the test did not poll it", n, batches)
	}

	// Unpaced, the whole input is there at once: batches follow each
	// other until it is consumed, and the result is the same.
	fast := &scenario{job: "keyed-count", mode: sink.Transactional, backToBack: true, inputs: defaultInputs("keyed-count", 20000, 4)}
	fast.execute(t).check(t, "back to back over an unpaced input")
}
