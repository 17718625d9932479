package main

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// marker-in-microbatch: both runs equal the reference; markers travelled
// in every batch whose seam compared its part; every part the seam saved
// holds, key group by key group, what the marker's did.
func TestTeachMarkerInMicrobatch(t *testing.T) {
	worldLesson(t, "marker-in-microbatch", func(v *verdict) {
		w := v.wrong
		if len(w.steps) == 0 {
			t.Fatalf("the marker run compared no part: the mistake was not made")
		}
		marked := map[int64]bool{}
		for _, e := range w.rec.Events {
			if e.Kind == spacetime.Marker {
				marked[e.ID] = true
			}
		}
		if count(v.right, spacetime.Marker) != 0 {
			t.Errorf("the run without the mistake sent %d markers", count(v.right, spacetime.Marker))
		}
		var groups int64
		for _, s := range w.steps {
			if !marked[s.Point] {
				t.Errorf("batch %d: its seam compared a part, but no marker travelled in it", s.Point)
			}
			if s.From != s.To {
				t.Errorf("batch %d, %s: %d of %d key groups hold the seam's state at the marker, want all", s.Point, s.Task, s.From, s.To)
			}
			groups += s.To
		}
		if groups == 0 {
			t.Errorf("the parts compared held no state")
		}
		equalsReference(t, "the marker run", w)
		equalsReference(t, "the seams-only run", v.right)
	})
}
