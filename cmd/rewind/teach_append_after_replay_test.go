package main

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// append-after-replay: the append destination holds exactly the replayed
// records that were visible before the crash twice, its resolved rows
// are the reference's, and the transactional run holds each row once.
func TestTeachAppendAfterReplay(t *testing.T) {
	worldLesson(t, "append-after-replay", checkAppendAfterReplay(t))
}

// On microbatch the crash must come between the sink's flush and the
// commit, where a batch's rows are published. Its writer attempts number
// workers, not restarts, so this also tries that the lesson tells what
// was published before the restore without them.
func TestTeachAppendAfterReplayOnMicrobatch(t *testing.T) {
	worldLesson(t, "append-after-replay", checkAppendAfterReplay(t),
		"--executor", "microbatch", "--fail", "point=batch.after-sink,occurrence=4")
}

func checkAppendAfterReplay(t *testing.T) func(v *verdict) {
	return func(v *verdict) {
		w := v.wrong
		if w.cfg.SinkMode != sink.Append || v.right.cfg.SinkMode != sink.Transactional {
			t.Fatalf("sink modes %s and %s, want append beside transactional", w.cfg.SinkMode, v.right.cfg.SinkMode)
		}
		if len(w.steps) == 0 {
			t.Fatalf("the append run logged no replay: the mistake was not made")
		}
		// Every id in the replayed ranges, read from the input itself.
		replayed := map[int64]bool{}
		for _, s := range w.steps {
			for id := range inputRows(t, w.cfg.Inputs[s.Input], s.Partition, s.From, s.To) {
				replayed[id] = true
			}
		}
		var twice int64
		for id, n := range idCopies(t, w) {
			switch {
			case n > 2:
				t.Errorf("id %d is visible %d times; one crash can publish a row twice at most", id, n)
			case n == 2 && !replayed[id]:
				t.Errorf("id %d is visible twice but was not replayed", id)
			case n == 2:
				twice++
			}
		}
		if twice == 0 || twice != w.summary.SinkDuplicateRows {
			t.Errorf("%d ids visible twice, the summary counts %d duplicates: want the same, more than none", twice, w.summary.SinkDuplicateRows)
		}
		equalsReference(t, "the append run's resolved result", w)
		equalsReference(t, "the transactional run's result", v.right)
		if v.right.summary.SinkDuplicateRows != 0 {
			t.Errorf("the transactional run shows %d duplicates", v.right.summary.SinkDuplicateRows)
		}
	}
}
