package sink

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// smallRuns makes the store merge at every size from a few rows up, and
// the applier write a run per flush or two.
func smallRuns(t *testing.T) {
	t.Helper()
	fan, base, every := runFanIn, runClassBase, applyEvery
	runFanIn, runClassBase, applyEvery = 2, 1<<10, time.Millisecond
	t.Cleanup(func() { runFanIn, runClassBase, applyEvery = fan, base, every })
}

// mergesSettled waits until no merge is due and returns the rows merges
// wrote; it fails the test when the merger never gets there.
func mergesSettled(t *testing.T, is *idempotentSink) int64 {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		is.st.mu.Lock()
		_, due := pickMerge(is.st.man.runs)
		merged := is.st.merged
		is.st.mu.Unlock()
		if !due {
			return merged
		}
		if err := is.ap.failed(); err != nil || time.Now().After(deadline) {
			t.Fatalf("merges still due after 20 s (store error %v)", err)
		}
	}
}

// TestIdempotentRunsMerged: rows spread over many runs, merged at several
// sizes in the background and across a reopen, resolve exactly as the
// oracle resolves every row written: each key once, its greatest version,
// whichever run holds it; a replayed row (same key and version again, in
// a later run) replaces, never adds.
func TestIdempotentRunsMerged(t *testing.T) {
	smallRuns(t)
	r, seed := newRand(t)
	g := newGen(r, 400, 20000)
	f := newFixture(t)
	s := f.open(Idempotent, Parquet)
	w := f.writer(s, 0, 0)
	var all [][]int64
	var merged int64
	for e := range int64(60) {
		rows := g.rows(1 + r.IntN(200))
		if len(all) > 0 && r.IntN(3) == 0 {
			rows = append(rows, slices.Clone(all[r.IntN(len(all))]))
		}
		f.write(w, e, rows)
		must(t, w.Flush(e), "flush")
		all = append(all, rows...)
		if e%4 == 3 {
			must(t, s.(*idempotentSink).ap.drain(), "drain") // a run for these flushes
		}
		if e == 30 {
			must(t, w.Close(), "close writer")
			merged += mergesSettled(t, s.(*idempotentSink))
			must(t, s.Close(), "close")
			s = f.open(Idempotent, Parquet)
			w = f.writer(s, 0, 1)
		}
	}
	is := s.(*idempotentSink)
	must(t, is.ap.drain(), "drain")
	merged += mergesSettled(t, is)
	if merged == 0 {
		t.Fatalf("seed %d: no merge happened; the test is about merged runs", seed)
	}
	is.st.mu.Lock()
	runs := len(is.st.man.runs)
	is.st.mu.Unlock()
	if limit := 2 * 16; runs > limit { // fan-in 2: about two runs per size class
		t.Fatalf("seed %d: %d runs after merging, want at most %d", seed, runs, limit)
	}
	must(t, s.Finish(), "finish")
	must(t, w.Close(), "close writer")
	must(t, s.Close(), "close")
	f.wantResolved(all)
	t.Logf("seed %d: %d rows, %d runs left, %d rows written by merges", seed, len(all), runs, merged)
}

// TestIdempotentOrphanRunRemoved: a run the manifest does not name (a
// crash after writing it, before the manifest named it) is removed on
// open and its rows are not read.
func TestIdempotentOrphanRunRemoved(t *testing.T) {
	f := newFixture(t)
	s := f.open(Idempotent, Parquet)
	w := f.writer(s, 0, 0)
	rows := [][]int64{{1, 2, 5, 10}, {3, 4, 5, 20}}
	f.write(w, 0, rows)
	must(t, w.Flush(0), "flush")
	must(t, s.(*idempotentSink).ap.drain(), "drain")
	must(t, w.Close(), "close writer")
	must(t, s.Close(), "close")
	runs := runFiles(t, f.dir)
	orphan := filepath.Join(f.dir, runName(999))
	b, err := os.ReadFile(runs[0])
	must(t, err, "read run")
	must(t, os.WriteFile(orphan, b, 0o644), "write orphan")
	s = f.open(Idempotent, Parquet)
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatalf("orphan run %s still there after open: %v", orphan, err)
	}
	must(t, s.Finish(), "finish")
	must(t, s.Close(), "close")
	f.wantResolved(rows)
}

// FuzzDecodeManifest: any bytes decode to an error or to a manifest that
// encodes back to the same bytes; never a panic.
func FuzzDecodeManifest(f *testing.F) {
	m := manifest{layout: []byte(`{"columns":["a"]}`), id: newStoreID(), applied: 7, nextRun: 4,
		runs: []runMeta{{num: 1, rows: 10, size: 500, crc: 1}, {num: 3, rows: 2, size: 100, crc: 2}}}
	f.Add(m.encode())
	f.Add((&manifest{id: newStoreID(), nextRun: 1}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeManifest(b)
		if err != nil {
			return
		}
		if again := got.encode(); !bytes.Equal(again, b) {
			t.Fatalf("decoded %+v encodes to %x, not %x", got, again, b)
		}
	})
}
