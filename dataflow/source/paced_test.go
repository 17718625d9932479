package source

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Due follows the pacer's formula from the first Open: rate/parts records
// per second per partition, starting where each partition was opened, and
// no more than a bounded partition holds. An unpaced generator is not Paced.
func TestGenDueFollowsThePace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	opts := Options{DefaultSeed: 1, Now: func() time.Time { return now }}
	src, err := Open("gen:records=30,partitions=2,rate=1000", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p, ok := AsPaced(src)
	if !ok {
		t.Fatal("a paced generator is not Paced")
	}
	if d := p.Due(t0.Add(time.Second)); d != 0 {
		t.Fatalf("due %d before any Open, want 0", d)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r0, err := src.Open(t.Context(), 0, Position{Partition: "p0"}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := src.Open(t.Context(), 1, Position{Partition: "p1", Offset: 4}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	defer r0.Close()
	defer r1.Close()
	// 10 ms: 5 records per partition, p1 from 4.
	if d := p.Due(t0.Add(10 * time.Millisecond)); d != 5+9 {
		t.Fatalf("due %d at 10 ms, want 14", d)
	}
	// Long after: each partition holds 15.
	if d := p.Due(t0.Add(time.Hour)); d != 30 {
		t.Fatalf("due %d an hour in, want all 30", d)
	}
	unpaced, err := Open("gen:records=30", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer unpaced.Close()
	if _, ok := AsPaced(unpaced); ok {
		t.Fatal("an unpaced generator claims a pace")
	}
}
