package diagram

import (
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// A worker disk-phase replaces without a restore event is dead from the
// crash until its lane works again; what is recorded of the dead (a lost
// piece) does not revive it.
func TestDeadLaneEndsAtItsNextWork(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rec := Recording{
		Lanes: []spacetime.Lane{{ID: "worker-0", Kind: "unit", Worker: 0}, {ID: "worker-1", Kind: "unit", Worker: 1}},
		Events: []spacetime.Event{
			{T: ms(10), Kind: spacetime.UnitStart, Lane: "worker-1", Worker: 1, ID: 1, Note: "map"},
			{T: ms(20), Kind: spacetime.Crash, Worker: 1},
			{T: ms(25), Kind: spacetime.PieceLost, Lane: "worker-1", Worker: 1, ID: 1},
			{T: ms(40), Kind: spacetime.UnitStart, Lane: "worker-1", Worker: 1, ID: 2, Note: "reduce"},
			{T: ms(50), Kind: spacetime.UnitEnd, Lane: "worker-1", Worker: 1, ID: 2},
		},
	}
	m := newModel(rec)
	var dead []span
	for _, s := range m.spans {
		if s.kind == spanDead {
			dead = append(dead, s)
		}
	}
	if len(dead) != 1 || dead[0].from != ms(20) || dead[0].to != ms(40) || dead[0].open {
		t.Fatalf("dead spans %+v, want one from 20 ms to 40 ms", dead)
	}
}
