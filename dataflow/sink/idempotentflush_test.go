package sink

import (
	"sync"
	"testing"
	"time"
)

// TestIdempotentGroupCommit: flushes that queue while a transaction is
// being written share the next one, every flush returns only once its
// transaction is written, and across the group the greater version still
// wins per key. The first transaction is held until every other writer
// has queued, so the grouping is certain, not a matter of timing.
func TestIdempotentGroupCommit(t *testing.T) {
	const writers, keys = 8, 50
	r, _ := newRand(t)
	f := newFixture(t)
	s := f.open(Idempotent, Parquet)
	is := s.(*idempotentSink)

	release := make(chan struct{})
	var first sync.Once
	applyHook = func(int) { first.Do(func() { <-release }) }
	defer func() { applyHook = nil }()

	// Every writer writes every key, each with versions of its own
	// (distinct across writers), in shuffled order.
	var all [][]int64
	in := make([][][]int64, writers)
	for w := range in {
		for k := range keys {
			row := []int64{int64(k), 7, int64(r.IntN(1000)*writers + w), int64(w)}
			in[w] = append(in[w], row)
			all = append(all, row)
		}
		r.Shuffle(len(in[w]), func(i, j int) { in[w][i], in[w][j] = in[w][j], in[w][i] })
	}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	returned := make(chan int, writers)
	for w := range writers {
		wr := f.writer(s, w, 0)
		defer wr.Close()
		write(t, f.mem, wr, f.layout, 1, in[w])
		wg.Go(func() {
			errs <- wr.Flush(1)
			returned <- w
		})
		if w == 0 {
			waitFor(t, func() bool { is.group.mu.Lock(); defer is.group.mu.Unlock(); return is.group.busy })
		}
	}
	// The other writers queue behind the held transaction.
	waitFor(t, func() bool { is.group.mu.Lock(); defer is.group.mu.Unlock(); return len(is.group.queue) == writers-1 })
	select {
	case w := <-returned:
		t.Fatalf("writer %d's flush returned while the first transaction was still held", w)
	default:
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err, "flush")
	}
	if got := is.group.txns; got != 2 {
		t.Fatalf("%d flushes took %d transactions, want 2 (one held alone, then the %d queued behind it together)", writers, got, writers-1)
	}
	must(t, s.Finish(), "finish")
	must(t, s.Close(), "close")
	f.wantResolved(all)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
