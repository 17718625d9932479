package spacetime

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNilRecorder: every method of a nil recorder does nothing.
func TestNilRecorder(t *testing.T) {
	var r *Recorder
	r.AddLane(Lane{ID: "a"})
	r.Record(Event{Kind: Batch})
	if r.Read("a", "p0", 0, 5) || r.Replaying("a") || r.Enabled() || r.Lanes() != nil || r.Events() != nil {
		t.Fatal("a nil recorder recorded something")
	}
}

// TestReadMarksTheReplay: reading again what was read records one
// ReplayStart where it starts and one ReplayEnd once past where the
// earlier reads got to, and only those reads report a replay.
func TestReadMarksTheReplay(t *testing.T) {
	r := NewRecorder(time.Now())
	for _, rd := range []struct {
		start, end int64
		replay     bool
	}{{0, 5, false}, {5, 10, false}, {3, 6, true}, {6, 9, true}, {9, 12, true}, {12, 14, false}} {
		if got := r.Read("src-0", "p0", rd.start, rd.end); got != rd.replay {
			t.Errorf("Read(%d, %d) replay %v, want %v", rd.start, rd.end, got, rd.replay)
		}
	}
	var kinds []string
	for _, e := range r.Events() {
		kinds = append(kinds, fmt.Sprintf("%s@%d", e.Kind, e.ID))
	}
	if got := strings.Join(kinds, " "); got != "replay-start@3 replay-end@10" {
		t.Errorf("events %s, want a replay from 3 ending at 10", got)
	}
}

// TestNormaliseDropsTiming: two recordings of the same story with other
// timing, batch sizes and interleavings normalise the same, and one with a
// milestone missing does not.
func TestNormaliseDropsTiming(t *testing.T) {
	lanes := []Lane{{ID: "a", Kind: "source"}, {ID: "b", Kind: "operator", Worker: 1}}
	one := []Event{
		{T: 1, Kind: Batch, From: "a", To: "b", Records: 3},
		{T: 2, Kind: Marker, From: "a", To: "b", Channel: "a->b", ID: 1},
		{T: 3, Kind: BlockStart, Lane: "b", Channel: "a->b", ID: 1},
		{T: 4, Kind: SnapshotStart, Lane: "b", ID: 1},
		{T: 5, Kind: InFlight, Lane: "b", Channel: "a->b", ID: 1, Records: 2},
	}
	two := []Event{
		{T: 7, Kind: BlockStart, Lane: "b", Channel: "c->b", ID: 1},
		{T: 8, Kind: Marker, From: "c", To: "b", Channel: "c->b", ID: 1},
		{T: 9, Kind: Batch, From: "a", To: "b", Records: 1},
		{T: 9, Kind: Batch, From: "a", To: "b", Records: 2},
		{T: 10, Kind: SnapshotStart, Lane: "b", ID: 1},
		{T: 11, Kind: InFlight, Lane: "a", Channel: "x", ID: 1, Records: 7},
	}
	if a, b := Normalise(lanes, one), Normalise(lanes, two); a != b {
		t.Errorf("same story, different text:\n%s\n---\n%s", a, b)
	}
	if a, b := Normalise(lanes, one), Normalise(lanes, one[:3]); a == b {
		t.Errorf("a missing snapshot-start went unnoticed:\n%s", a)
	}
}
