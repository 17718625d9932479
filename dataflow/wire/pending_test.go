package wire

import "testing"

// Answers reach the request they name, once; one for a request nobody
// waits for any more, or never made, is dropped without blocking.
func TestPendingPairsAnswersWithTheirRequests(t *testing.T) {
	var p Pending[string]
	a, cha := p.Add()
	b, chb := p.Add()
	if a == b || a == 0 {
		t.Fatalf("ids %d and %d: want distinct, from 1", a, b)
	}
	p.Deliver(b, "for b")
	p.Deliver(b, "again") // answered already: dropped, not blocked on
	p.Deliver(99, "stranger")
	p.Deliver(a, "for a")
	if got := <-cha; got != "for a" {
		t.Fatalf("a got %q", got)
	}
	if got := <-chb; got != "for b" {
		t.Fatalf("b got %q", got)
	}
	c, chc := p.Add()
	p.Forget(c)
	p.Deliver(c, "late")
	select {
	case got := <-chc:
		t.Fatalf("a forgotten request got %q", got)
	default:
	}
}
