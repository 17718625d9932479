package main

import (
	"slices"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// stop-the-world: both runs equal the reference; the stopped run logged a
// stop at recovery points it completed, and no record moved on any
// channel from every part saved until the sources resumed.
func TestTeachStopTheWorld(t *testing.T) {
	worldLesson(t, "stop-the-world", func(v *verdict) {
		w := v.wrong
		if len(w.steps) == 0 {
			t.Fatalf("the stop-the-world run logged no stop: the mistake was not made")
		}
		var complete []int64
		for _, e := range w.rec.Events {
			if e.Kind == spacetime.PointComplete {
				complete = append(complete, e.ID)
			}
		}
		for _, s := range w.steps {
			if !slices.Contains(complete, s.Point) {
				t.Errorf("a stop logged for checkpoint %d, which did not complete (complete: %v)", s.Point, complete)
			}
			from, to := time.UnixMicro(s.From).Sub(w.start), time.UnixMicro(s.To).Sub(w.start)
			if to < from || from < 0 {
				t.Errorf("checkpoint %d: the stop runs from %s to %s", s.Point, from, to)
			}
			for _, e := range w.rec.Events {
				if e.Kind == spacetime.Batch && e.T > from && e.T < to {
					t.Errorf("checkpoint %d: records moved %s -> %s at %s, inside the stop [%s, %s]", s.Point, e.From, e.To, e.T, from, to)
				}
			}
		}
		if count(w, spacetime.Batch) == 0 {
			t.Fatalf("the run moved no records between tasks: nothing to see stop")
		}
		equalsReference(t, "the stop-the-world run", w)
		equalsReference(t, "the marker run", v.right)
	})
}
