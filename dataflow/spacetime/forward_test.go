package spacetime

import (
	"testing"
	"time"
)

// A worker's recorder forwards its events with their times and its read
// marks; a replacement seeded with the coordinator's marks draws its
// first re-read as a replay.
func TestForwardedEventsKeepTheirTimesAndReadsSeedAReplacement(t *testing.T) {
	start := time.Now()
	coord := NewRecorder(start)
	coord.AddLane(Lane{ID: "src-0", Kind: "source"})
	worker := NewRecorder(time.Unix(0, coord.Start().UnixNano()))
	at := start.Add(5 * time.Millisecond)
	worker.Add(at, Event{Kind: Batch, From: "src-0", To: "op-0", Records: 7})
	if worker.Read("src-0", "in/p0", 0, 100) {
		t.Fatal("a first read counted as a replay")
	}
	f := worker.Drain()
	if len(f.Events) != 1 || f.Reads["src-0\x00in/p0"] != 100 {
		t.Fatalf("drained %+v, want one event and the read mark 100", f)
	}
	if again := worker.Drain(); !again.Empty() {
		t.Fatalf("a second drain sent %+v, want nothing", again)
	}
	coord.Merge(f)
	ev := coord.Events()
	if len(ev) != 1 || ev[0].T != 5*time.Millisecond || ev[0].Records != 7 {
		t.Fatalf("merged %+v, want the batch at 5ms", ev)
	}
	if len(worker.Lanes()) != 0 || len(coord.Lanes()) != 1 {
		t.Fatal("lanes travelled with the events")
	}

	repl := NewRecorder(coord.Start())
	repl.SeedReads(coord.Reads())
	if !repl.Read("src-0", "in/p0", 50, 80) {
		t.Fatal("a replacement's re-read below the dead worker's mark was not a replay")
	}
	g := repl.Drain()
	if len(g.Events) != 1 || g.Events[0].Kind != ReplayStart {
		t.Fatalf("replacement drained %+v, want its ReplayStart", g.Events)
	}
	if len(g.Reads) != 0 {
		t.Fatalf("a read below the mark moved it: %+v", g.Reads)
	}
	var nilRec *Recorder
	nilRec.Merge(f)
	if !nilRec.Drain().Empty() || nilRec.Reads() != nil {
		t.Fatal("a nil recorder forwarded something")
	}
}
