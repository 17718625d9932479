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

// A worker process's source that follows its coordinator's schedule reads
// as a reader in the coordinator would: a split opened later, elsewhere,
// finds what is due by the coordinator's anchor and base, not by its own
// first open. Without the schedule the same open waits (the control).
func TestAFollowedScheduleIsTheCoordinators(t *testing.T) {
	const spec = "gen:records=40,partitions=2,rate=1000"
	c := newFakeClock()
	coord := mustOpen(t, spec, c.options(1))
	defer coord.Close()
	s0, ok := FixSchedule(coord, 0, Position{Partition: "p0"})
	if !ok {
		t.Fatal("a paced generator has no schedule")
	}
	s1, _ := FixSchedule(coord, 1, Position{Partition: "p1", Offset: 4})
	if s0.Start != s1.Start || s0.Base != 0 || s1.Base != 4 {
		t.Fatalf("schedules %+v %+v: want one start, bases 0 and 4", s0, s1)
	}
	if again, _ := FixSchedule(coord, 1, Position{Partition: "p1", Offset: 9}); again != s1 {
		t.Fatalf("a later fix moved the schedule: %+v, want %+v", again, s1)
	}
	_ = c.Sleep(t.Context(), 10*time.Millisecond) // 5 records a partition due
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)

	read := func(follow bool) (rows int64, sleeps int) {
		w := mustOpen(t, spec, c.options(1)) // a fresh worker process's source
		defer w.Close()
		if follow {
			FollowSchedule(w, 0, s0)
			FollowSchedule(w, 1, s1)
			if d, want := w.(Paced).Due(c.Now()), coord.(Paced).Due(c.Now()); d != want {
				t.Fatalf("worker's due %d, coordinator's %d", d, want)
			}
		}
		r, err := w.Open(t.Context(), 1, Position{Partition: "p1", Offset: 6}, alloc)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		before := c.sleeps
		b, _, err := r.Next(t.Context(), 100)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		return b.NumRows(), c.sleeps - before
	}
	// p1 from 4 has 4..8 due at 10 ms: 6, 7 and 8 at once.
	if rows, sleeps := read(true); rows != 3 || sleeps != 0 {
		t.Fatalf("following: %d rows after %d sleeps, want 3 at once", rows, sleeps)
	}
	if _, sleeps := read(false); sleeps == 0 {
		t.Fatal("control: a source with its own schedule read at once; the test shows nothing")
	}
	if _, ok := FixSchedule(mustOpen(t, "gen:records=40", c.options(1)), 0, Position{}); ok {
		t.Fatal("an unpaced generator has a schedule")
	}
}
