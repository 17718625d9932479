package offheap

import (
	"runtime"
	"testing"
	"time"
)

type entry struct{ a, b, c int64 }

func TestMappedArrayIsZeroedWritableAndFreed(t *testing.T) {
	before := Live()
	n := 3*MinBytes/24 + 7 // not a whole number of pages
	a := New[entry](n)
	if !a.Mapped() {
		t.Fatalf("an array of %d bytes is not mapped", n*24)
	}
	if len(a.S) != n {
		t.Fatalf("len %d, want %d", len(a.S), n)
	}
	if got := Live() - before; got != int64(n*24) {
		t.Fatalf("Live grew by %d, want %d", got, n*24)
	}
	for i := range a.S {
		if a.S[i] != (entry{}) {
			t.Fatalf("entry %d is %v, want zero", i, a.S[i])
		}
		a.S[i] = entry{int64(i), 2, 3}
	}
	for i := range a.S {
		if a.S[i].a != int64(i) {
			t.Fatalf("entry %d reads back %v", i, a.S[i])
		}
	}
	a.Free()
	a.Free() // again: nothing
	if a.S != nil {
		t.Fatal("S not nil after Free")
	}
	if got := Live(); got != before {
		t.Fatalf("Live is %d after Free, want %d", got, before)
	}
}

func TestSmallArrayStaysOnTheHeap(t *testing.T) {
	before := Live()
	a := New[entry](MinBytes/24 - 1)
	if a.Mapped() || Live() != before {
		t.Fatalf("a %d-byte array was mapped", len(a.S)*24)
	}
	a.S[len(a.S)-1].c = 1
	a.Free()
	var nilArray *Array[entry]
	nilArray.Free()
}

func TestUnreachableArrayIsFreedByItsCleanup(t *testing.T) {
	before := Live()
	func() {
		a := New[entry](MinBytes)
		a.S[0].a = 1
	}()
	deadline := time.Now().Add(10 * time.Second)
	for Live() != before {
		if time.Now().After(deadline) {
			t.Fatalf("Live is %d 10 s after the array became unreachable, want %d", Live(), before)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// TestRecycledMappingIsReusedClearedOrUnmapped: a recycled mapping is
// handed, cleared, to the next array of its size; one nobody asks for is
// unmapped by the next collection.
func TestRecycledMappingIsReusedClearedOrUnmapped(t *testing.T) {
	before := Live()
	n := 2 * MinBytes / 24
	a := New[entry](n)
	for i := range a.S {
		a.S[i] = entry{1, 2, 3}
	}
	first := &a.S[0]
	a.Recycle()
	if Live() != before {
		t.Fatalf("Live is %d after Recycle, want %d", Live(), before)
	}
	b := New[entry](n)
	if &b.S[0] != first {
		t.Fatal("the recycled mapping of the same size was not reused")
	}
	for i := range b.S {
		if b.S[i] != (entry{}) {
			t.Fatalf("reused entry %d is %v, want zero", i, b.S[i])
		}
	}
	b.Recycle()
	deadline := time.Now().Add(10 * time.Second)
	for {
		kept.Lock()
		n := kept.bytes
		kept.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bytes still kept 10 s and many collections after Recycle", n)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
