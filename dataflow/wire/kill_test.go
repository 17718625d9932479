package wire

import (
	"testing"
	"time"
)

// A kill frame reaches a worker's OnKill, and its connection then breaks
// as for any death; a coordinator, which has no OnKill, takes a worker's
// kill frame as malformed: that connection closes, with the reason logged,
// and the listener keeps accepting.
func TestAKillFrameEndsOnlyASideThatTakesIt(t *testing.T) {
	killed := make(chan struct{})
	l, coord, worker, log := pair(t, pairOpts{worker: Options{OnKill: func() { close(killed) }}})
	if err := coord.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's OnKill was not called")
	}
	for _, c := range []*Conn{worker, coord} {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the connection stayed open after the kill")
		}
	}

	c, w, _, _ := pairOn(t, l)
	if err := w.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator kept a connection whose worker sent it a kill frame")
	}
	log.waitLog(t, "kill frame")
	if c2, w2, _, _ := pairOn(t, l); c2.Err() != nil || w2.Err() != nil {
		t.Fatalf("the next connection: %v / %v", c2.Err(), w2.Err())
	}
}
