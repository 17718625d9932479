package sink

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tailRows decodes the complete segments of a tail with its own reader
// (no code shared with eachSegment): for each segment, 24 header bytes,
// then rows values per column.
func tailRows(t *testing.T, path string, ncols int) (rows int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err, "read tail")
	for len(b) >= segHeader {
		n := int64(binary.LittleEndian.Uint64(b[8:]))
		size := segHeader + n*int64(ncols)*8
		if int64(len(b)) < size {
			break
		}
		rows += n
		b = b[size:]
	}
	return rows
}

// tailSink opens a parquet append sink with a journal that rolls only
// when told to (an hour's age), resumed from no point, and its writer of
// subtask 0.
func tailSink(t *testing.T) (*fixture, *gen, Sink, Writer) {
	t.Helper()
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	r, _ := newRand(t)
	g := newGen(r, 300, 1000)
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	t.Cleanup(func() { _ = s.Close() })
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	return f, g, s, f.writer(s, 0, 0)
}

// TestTailVisibleAcrossRoll: rows are visible from their flush through the
// tail, and counted once while the tail is there, after its roll while the
// rolled tail is kept (a journal keeps it until a complete point lists the
// visible file), and once it is gone.
func TestTailVisibleAcrossRoll(t *testing.T) {
	f, g, s, w := tailSink(t)
	var all [][]int64
	for i := 0; i < 3; i++ {
		rows := g.rows(40)
		all = append(all, rows...)
		f.write(w, 0, rows)
		must(t, w.Flush(0), "flush")
	}
	tail := filepath.Join(f.dir, InProgressDir, "part-s0-a0-000000.parquet")
	if n := tailRows(t, tail, 4); n != int64(len(all)) {
		t.Fatalf("tail holds %d rows by an independent reader, want %d", n, len(all))
	}
	check := func(when string) {
		t.Helper()
		_, st := f.wantResolved(all)
		if st.VisibleRows != int64(len(all)) || st.DuplicateRows != 0 || st.Files != 1 {
			t.Fatalf("%s: stats %+v, want %d visible rows in one file, no duplicates", when, st, len(all))
		}
	}
	check("tail only")
	must(t, s.Record(0), "record 0")
	must(t, w.(*appendWriter).roll(), "roll")
	if _, err := os.Stat(tail); err != nil {
		t.Fatalf("rolled tail gone before a complete point lists its visible file: %v", err)
	}
	if n := len(visibleNames(t, f.dir)); n != 1 {
		t.Fatalf("%d visible files after the roll, want 1", n)
	}
	check("rolled, tail kept")
	must(t, s.Record(1), "record 1")
	must(t, s.Commit(1), "commit 1")
	waitRemovals(s)
	if _, err := os.Stat(tail); !os.IsNotExist(err) {
		t.Fatalf("rolled tail still there after the point listing its file: %v", err)
	}
	check("rolled, tail removed")
}

// TestTailDamage: a tail's end cut short (a flush being written) holds the
// rows of its complete segments; a complete segment that fails its
// checksum, in its payload or its header, stops resolution with one line
// naming the tail.
func TestTailDamage(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, path string)
		refused bool
	}{
		{"cut-short", func(t *testing.T, p string) {
			fi, err := os.Stat(p)
			must(t, err, "stat")
			must(t, os.Truncate(p, fi.Size()-7), "truncate")
		}, false},
		{"cut-in-header", func(t *testing.T, p string) {
			// 3 flushes of 10 rows: 344 bytes each; keep 2 and 10 header bytes.
			must(t, os.Truncate(p, 2*344+10), "truncate")
		}, false},
		{"payload-flipped", func(t *testing.T, p string) { flipByte(t, p, 344+100) }, true},
		{"rows-flipped", func(t *testing.T, p string) { flipByte(t, p, 344+8) }, true},
		{"magic-flipped", func(t *testing.T, p string) { flipByte(t, p, 344) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			r, _ := newRand(t)
			g := newGen(r, 300, 1000)
			s := rollingSink(t, f, CSV, RollPolicy{Age: time.Hour})
			defer s.Close()
			w := f.writer(s, 0, 0)
			var flushes [][][]int64
			for i := 0; i < 3; i++ {
				rows := g.rows(10)
				flushes = append(flushes, rows)
				f.write(w, 0, rows)
				must(t, w.Flush(0), "flush")
			}
			tail := filepath.Join(f.dir, InProgressDir, "part-s0-a0-000000.csv")
			c.damage(t, tail)
			if !c.refused {
				f.wantResolved(append(append([][]int64{}, flushes[0]...), flushes[1]...))
				return
			}
			_, _, err := Resolve(f.dir, f.layout)
			if err == nil || !strings.Contains(err.Error(), tail) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("resolve of a damaged tail: %v; want one line naming %s", err, tail)
			}
		})
	}
}

// TestTailConcurrentReaders: readers resolving while a writer flushes and
// rolls by size never count a row twice or miss one that was flushed
// before they started.
func TestTailConcurrentReaders(t *testing.T) {
	f := newFixture(t)
	r, _ := newRand(t)
	g := newGen(r, 1<<30, 20000)
	// 344 bytes a flush of 10 rows: a roll every third flush.
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour, Size: 1000})
	defer s.Close()
	w := f.writer(s, 0, 0)
	var flushed atomic.Int64
	var all [][]int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	var fail atomic.Value
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				before := flushed.Load()
				st, err := ResolveEach(f.dir, f.layout, ResolveOptions{}, nil)
				after := flushed.Load()
				switch {
				case err != nil:
					fail.CompareAndSwap(nil, err.Error())
				case st.DuplicateRows != 0 || st.VisibleRows < before || st.VisibleRows > after+10:
					fail.CompareAndSwap(nil, fmt.Sprintf("a reader saw %d rows, %d duplicates, with %d to %d flushed",
						st.VisibleRows, st.DuplicateRows, before, after))
				}
				reads.Add(1)
			}
		}()
	}
	for i := 0; i < 300 && fail.Load() == nil; i++ {
		rows := g.rows(10)
		all = append(all, rows...)
		f.write(w, 0, rows)
		must(t, w.Flush(0), "flush")
		flushed.Add(10)
	}
	close(done)
	wg.Wait()
	if msg := fail.Load(); msg != nil {
		t.Fatal(msg)
	}
	if reads.Load() < 10 {
		t.Fatalf("only %d reads ran beside the writer: the race this test is about did not happen", reads.Load())
	}
	must(t, w.Close(), "close writer")
	f.wantResolved(all)
}

// TestRollOfADamagedTail: a roll streams its tail into the visible file
// and checks the tail against its record on the way; a flipped byte makes
// the roll fail, naming the tail, and publishes nothing.
func TestRollOfADamagedTail(t *testing.T) {
	f := newFixture(t)
	r, _ := newRand(t)
	g := newGen(r, 300, 1000)
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	defer s.Close()
	w := f.writer(s, 0, 0)
	for i := 0; i < 3; i++ {
		f.write(w, 0, g.rows(40))
		must(t, w.Flush(0), "flush")
	}
	tail := filepath.Join(f.dir, InProgressDir, "part-s0-a0-000000.parquet")
	flipByte(t, tail, 344+100)
	err := w.(*appendWriter).roll()
	if err == nil || !strings.Contains(err.Error(), tail) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("roll of a damaged tail: %v; want one line naming %s", err, tail)
	}
	if n := len(visibleNames(t, f.dir)); n != 0 {
		t.Fatalf("%d visible files after a failed roll, want none", n)
	}
}

// TestRolledTailRemovalFailureIsReported: Commit removes rolled tails in
// the background; one that cannot be removed (here a directory with an
// entry stands where the tail was) is reported by the next Commit, naming
// the file, instead of being forgotten.
func TestRolledTailRemovalFailureIsReported(t *testing.T) {
	f, g, s, w := tailSink(t)
	f.write(w, 0, g.rows(40))
	must(t, w.Flush(0), "flush")
	must(t, s.Record(0), "record 0")
	must(t, w.(*appendWriter).roll(), "roll")
	tail := filepath.Join(f.dir, InProgressDir, "part-s0-a0-000000.parquet")
	must(t, os.Remove(tail), "remove the tail")
	must(t, os.MkdirAll(filepath.Join(tail, "x"), 0o755), "a directory in its place")
	must(t, s.Record(1), "record 1")
	must(t, s.Commit(1), "commit 1 (the removal starts)")
	waitRemovals(s)
	err := s.Commit(2)
	if err == nil || !strings.Contains(err.Error(), "part-s0-a0-000000.parquet") {
		t.Fatalf("commit after a failed removal: %v, want an error naming the tail", err)
	}
}
