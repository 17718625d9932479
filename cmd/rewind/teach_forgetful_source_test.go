package main

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
)

// forgetful-source: the push run's result lacks exactly the rows of the
// records in the gap the run reported (lost_records long, from where the
// restored point put the feed), and the re-readable run equals the
// reference.
func TestTeachForgetfulSource(t *testing.T) {
	worldLesson(t, "forgetful-source", func(v *verdict) {
		w, r := v.wrong, v.right
		push, gen := w.cfg.Inputs[job.DefaultInput], r.cfg.Inputs[job.DefaultInput]
		if !strings.HasPrefix(push, "push:") || !strings.HasPrefix(gen, "gen:") {
			t.Fatalf("inputs %q and %q, want a push feed beside a generator", push, gen)
		}
		if len(w.steps) != 1 {
			t.Fatalf("the push run logged %d gaps, want one", len(w.steps))
		}
		gap := w.steps[0]
		if w.summary.LostRecords <= 0 || gap.To-gap.From != w.summary.LostRecords {
			t.Fatalf("gap [%d, %d), lost_records %d: want a gap as long as the loss, more than none", gap.From, gap.To, w.summary.LostRecords)
		}
		// The push feed generates the generator's records in the same
		// order, so the gap is those records; etl's filter keeps values
		// of 0 and more.
		want := map[int64]bool{}
		for id, kv := range inputRows(t, gen, 0, gap.From, gap.To) {
			if kv[1] >= 0 {
				want[id] = true
			}
		}
		refIDs, err := rowIDs(referenceOf(t, r, r.cfg.Inputs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := rowIDs(w.result)
		if err != nil {
			t.Fatal(err)
		}
		missing := map[int64]bool{}
		for id := range refIDs {
			if !got[id] {
				missing[id] = true
			}
		}
		for id := range got {
			if !refIDs[id] {
				t.Errorf("the push run has a row for id %d, which the reference has not", id)
			}
		}
		if !sameIDs(missing, want) || len(want) == 0 {
			t.Errorf("the push run misses ids %s, want exactly the gap's %s (and some)", idList(missing), idList(want))
		}
		equalsReference(t, "the re-readable run", r)
		if r.summary.LostRecords != 0 {
			t.Errorf("the re-readable run lost %d records", r.summary.LostRecords)
		}
	})
}
