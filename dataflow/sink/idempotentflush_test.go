package sink

import (
	"strings"
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
	appendHook = func(int) { first.Do(func() { <-release }) }
	defer func() { appendHook = nil }()

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

// TestIdempotentMergeFailureFailsLaterFlushes: when the merger meets a
// damaged run, the rows acknowledged so far are in the log or in intact
// runs, but the store is damaged: the next flush, Record and Finish fail
// naming it.
func TestIdempotentMergeFailureFailsLaterFlushes(t *testing.T) {
	defer func(n int) { runFanIn = n }(runFanIn)
	runFanIn = 2 // the second run starts a merge that reads the first
	f := newFixture(t)
	s := f.open(Idempotent, Parquet)
	defer s.Close()
	is := s.(*idempotentSink)
	w0 := f.writer(s, 0, 0)
	defer w0.Close()
	write(t, f.mem, w0, f.layout, 0, [][]int64{{1, 1, 0, 0}})
	must(t, w0.Flush(0), "first flush")
	must(t, is.ap.drain(), "drain")
	// Damage the stored row behind the sink's back.
	flipAt(t, runFiles(t, f.dir)[0], idemRunHeaderLen+3)
	write(t, f.mem, w0, f.layout, 1, [][]int64{{1, 1, 1, 0}})
	must(t, w0.Flush(1), "flush into the log")
	want := func(err error, what string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "damaged embedded store") || !strings.Contains(err.Error(), is.path) {
			t.Fatalf("%s after the applier met a damaged row: %v; want an error naming the damaged store", what, err)
		}
	}
	// The merge runs in the background: wait for it to fail.
	for deadline := time.Now().Add(10 * time.Second); is.ap.failed() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the merger did not fail within 10 s on a damaged run")
		}
	}
	want(is.ap.drain(), "drain")
	write(t, f.mem, w0, f.layout, 2, [][]int64{{1, 1, 2, 0}})
	want(w0.Flush(2), "flush")
	want(s.Finish(), "finish")
}
