package sink

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// rollingSink opens an append sink over f with policy p.
// waitRemovals waits for the removals of rolled files the append sink s's
// Commits started in the background.
func waitRemovals(s Sink) { s.(*appendSink).aj.removing.Wait() }

func rollingSink(t *testing.T, f *fixture, format Format, p RollPolicy) Sink {
	t.Helper()
	s := f.open(Append, format)
	must(t, Roll(s, p), "roll policy")
	return s
}

// visibleCount counts callbacks of FlushVisible.
type visibleCount struct {
	mu sync.Mutex
	n  int
	at []time.Time
}

func (v *visibleCount) fn(at time.Time) {
	v.mu.Lock()
	v.n++
	v.at = append(v.at, at)
	v.mu.Unlock()
}

func (v *visibleCount) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n
}

// TestAppendRollFewFiles: with a long roll age, many flushes make no
// visible file until Finish, which publishes one file per writer holding
// every row; yet every flush's rows are visible at once, through the
// writers' tails, and counted once before and after the roll.
func TestAppendRollFewFiles(t *testing.T) {
	for _, format := range []Format{Parquet, CSV} {
		t.Run(string(format), func(t *testing.T) {
			f := newFixture(t)
			r, _ := newRand(t)
			g := newGen(r, 200, 2000)
			s := rollingSink(t, f, format, RollPolicy{Age: time.Hour})
			defer s.Close()
			ws := []Writer{f.writer(s, 0, 0), f.writer(s, 1, 0)}
			var all [][]int64
			var vis visibleCount
			for i := 0; i < 40; i++ {
				for _, w := range ws {
					rows := g.rows(20)
					all = append(all, rows...)
					f.write(w, int64(i/10), rows)
					n := vis.count()
					must(t, w.(VisibleFlusher).FlushVisible(int64(i/10), vis.fn), "flush")
					if vis.count() != n+1 {
						t.Fatalf("flush %d: not told visible when it returned", i)
					}
				}
			}
			if n := len(visibleNames(t, f.dir)); n != 0 {
				t.Fatalf("%d visible files before the roll, want 0", n)
			}
			_, st := f.wantResolved(all)
			if st.DuplicateRows != 0 || st.VisibleRows != int64(len(all)) || st.Files != 2 {
				t.Fatalf("before the roll: stats %+v, want %d visible rows in 2 tails and no duplicates", st, len(all))
			}
			must(t, s.Finish(), "finish")
			if n := len(visibleNames(t, f.dir)); n != 2 {
				t.Fatalf("%d visible files after Finish, want 2 (one per writer): %v", n, visibleNames(t, f.dir))
			}
			if _, err := os.Stat(filepath.Join(f.dir, InProgressDir)); !os.IsNotExist(err) {
				t.Fatalf("%s left after Finish: %v", InProgressDir, err)
			}
			_, st = f.wantResolved(all)
			if st.DuplicateRows != 0 || st.VisibleRows != int64(len(all)) {
				t.Fatalf("stats %+v, want %d visible rows and no duplicates", st, len(all))
			}
		})
	}
}

// TestAppendRollBySize: a file rolls at the flush that brings it to the
// size limit, so the files hold about that many bytes of rows each.
func TestAppendRollBySize(t *testing.T) {
	f := newFixture(t)
	r, _ := newRand(t)
	g := newGen(r, 200, 2000)
	// 10 rows a flush: 24 + 10*4*8 = 344 bytes a segment; 1000 bytes
	// roll at every third flush.
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour, Size: 1000})
	defer s.Close()
	w := f.writer(s, 0, 0)
	var all [][]int64
	for i := 0; i < 12; i++ {
		rows := g.rows(10)
		all = append(all, rows...)
		f.write(w, 0, rows)
		must(t, w.Flush(0), "flush")
		// A due file rolls in the background; one that falls due while
		// a roll runs waits for it, so each roll is awaited here.
		w.(*appendWriter).settle()
	}
	if n := len(visibleNames(t, f.dir)); n != 4 {
		t.Fatalf("%d visible files after 12 flushes rolling every 3, want 4: %v", n, visibleNames(t, f.dir))
	}
	must(t, w.Close(), "close writer")
	f.wantResolved(all)
}

// TestAppendRollAgeWithoutFlush: a writer that stops flushing still rolls
// about the roll age later, without another flush; its rows are visible
// from the flush on, and counted once before and after the roll.
func TestAppendRollAgeWithoutFlush(t *testing.T) {
	f := newFixture(t)
	r, _ := newRand(t)
	g := newGen(r, 200, 2000)
	s := rollingSink(t, f, CSV, RollPolicy{Age: 20 * time.Millisecond})
	defer s.Close()
	w := f.writer(s, 0, 0)
	rows := g.rows(10)
	f.write(w, 0, rows)
	var vis visibleCount
	t0 := time.Now()
	must(t, w.(VisibleFlusher).FlushVisible(0, vis.fn), "flush")
	if vis.count() != 1 {
		t.Fatalf("%d visible callbacks when the flush returned, want 1", vis.count())
	}
	for len(visibleNames(t, f.dir)) == 0 {
		f.wantResolved(rows)
		if time.Since(t0) > 10*time.Second {
			t.Fatal("no roll 10 s after a flush with a 20 ms roll age")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if d := time.Since(t0); d < 20*time.Millisecond {
		t.Fatalf("rolled %s after the flush, before the roll age", d)
	}
	f.wantResolved(rows)
	must(t, w.Close(), "close writer")
}

// appendRollKilled writes, with a journal and a roll age no flush
// reaches: epoch 0 in two flushes per subtask, Commit(0) (the record
// names a prefix of each in-progress file), then epoch 1 (no record), and
// leaves the sink as a killed process does: nothing rolled.
func appendRollKilled(t *testing.T, f *fixture, j *Journal) (epoch0, epoch1 [][]int64) {
	t.Helper()
	r, _ := newRand(t)
	g := newGen(r, 300, 1000)
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	ws := []Writer{f.writer(s, 0, 0), f.writer(s, 1, 0)}
	for e := int64(0); e < 2; e++ {
		if e == 1 {
			must(t, s.Commit(0), "commit 0")
		}
		for i := 0; i < 2; i++ {
			for _, w := range ws {
				rows := g.rows(25)
				if e == 0 {
					epoch0 = append(epoch0, rows...)
				} else {
					epoch1 = append(epoch1, rows...)
				}
				f.write(w, e, rows)
				must(t, w.Flush(e), "flush")
			}
		}
	}
	must(t, s.Close(), "close") // no Finish, no writer closed: a kill
	if n := len(visibleNames(t, f.dir)); n != 0 {
		t.Fatalf("%d visible files before any roll", n)
	}
	return epoch0, epoch1
}

// TestAppendRollKilled: a resume from recovery point 0 publishes the rows
// the record says the in-progress files held at the point, checked
// against it, and the rows flushed after it that the files hold whole
// (they were visible; they come again as duplicates); it refuses a
// missing or damaged in-progress file, naming it.
func TestAppendRollKilled(t *testing.T) {
	ip := func(f *fixture) string { return filepath.Join(f.dir, InProgressDir, "part-s1-a0-000000.parquet") }
	cases := []struct {
		name   string
		damage func(f *fixture) string // the path the refusal names ("": none)
	}{
		{"intact", func(*fixture) string { return "" }},
		{"deleted", func(f *fixture) string { p := ip(f); must(f.t, os.Remove(p), "rm"); return p }},
		{"flipped-in-prefix", func(f *fixture) string { p := ip(f); flipByte(f.t, p, 30); return p }},
		{"truncated-into-prefix", func(f *fixture) string { p := ip(f); must(f.t, os.Truncate(p, 100), "truncate"); return p }},
		// Past the recorded prefix: subtask 1's last flush of epoch 1 is
		// cut short, as by a kill while it was written, and dropped.
		{"truncated-after-prefix", func(f *fixture) string {
			p := ip(f)
			fi, err := os.Stat(p)
			must(f.t, err, "stat")
			must(f.t, os.Truncate(p, fi.Size()-10), "truncate")
			return ""
		}},
		// A whole segment past the prefix that fails its checksum.
		{"flipped-after-prefix", func(f *fixture) string {
			p := ip(f)
			fi, err := os.Stat(p)
			must(f.t, err, "stat")
			flipByte(f.t, p, int(fi.Size())-10)
			return p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			epoch0, epoch1 := appendRollKilled(t, f, j)
			path := c.damage(f)
			want := append(slices.Clone(epoch0), epoch1...)
			if c.name == "truncated-after-prefix" {
				want = want[:len(want)-25]
			}
			s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
			defer s.Close()
			attach(t, s, j)
			err := s.Recover(0)
			if path != "" {
				wantRefusal(t, err, path, "recover")
				if !strings.Contains(err.Error(), "50 rows") {
					t.Fatalf("refusal %q does not say what the recovery point says the file held", err)
				}
				return
			}
			must(t, err, "recover")
			_, st := f.wantResolved(want)
			if st.VisibleRows != int64(len(want)) {
				t.Fatalf("%d visible rows after the resume, want %d", st.VisibleRows, len(want))
			}
			// The published files go on the next record; once a point
			// that late is complete the in-progress files are removed.
			must(t, s.Commit(1), "commit 1")
			waitRemovals(s)
			if names := dirNames(t, filepath.Join(f.dir, InProgressDir)); len(names) != 0 {
				t.Fatalf("in-progress files %v left after their rows were recorded visible", names)
			}
			// A second resume from point 1 checks the published files.
			s2 := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
			defer s2.Close()
			attach(t, s2, j)
			must(t, s2.Recover(1), "second recover")
			f.wantResolved(want)
		})
	}
}

// recordedEpoch0 opens a rolling sink over f with journal j, as a first
// process does, and has one writer flush 30 rows of epoch 0 into its
// in-progress file and Record(0): the record names the file's prefix.
func recordedEpoch0(t *testing.T, f *fixture, j *Journal) (Sink, Writer, *gen, [][]int64) {
	t.Helper()
	r, _ := newRand(t)
	g := newGen(r, 300, 1000)
	s := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	w := f.writer(s, 0, 0)
	e0 := g.rows(30)
	f.write(w, 0, e0)
	must(t, w.Flush(0), "flush 0")
	must(t, s.Record(0), "record 0")
	return s, w, g, e0
}

// TestAppendRollKilledAfterRoll: a kill after a roll and before the next
// record leaves a visible file no record lists beside the in-progress file
// the record names; the resume publishes the recorded prefix again (its
// rows show as duplicates, counted) and leaves the unlisted file as it is.
func TestAppendRollKilledAfterRoll(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	s, w, g, e0 := recordedEpoch0(t, f, j)
	e1 := g.rows(30)
	f.write(w, 1, e1)
	must(t, w.Flush(1), "flush 1")
	must(t, w.(*appendWriter).roll(), "roll")
	must(t, s.Close(), "close")
	if n := len(visibleNames(t, f.dir)); n != 1 {
		t.Fatalf("%d visible files after the roll, want 1", n)
	}
	s2 := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	defer s2.Close()
	attach(t, s2, j)
	must(t, s2.Recover(0), "recover")
	if n := len(visibleNames(t, f.dir)); n != 2 {
		t.Fatalf("%d visible files after the resume, want 2: %v", n, visibleNames(t, f.dir))
	}
	_, st := f.wantResolved(append(append([][]int64{}, e0...), e1...))
	if st.DuplicateRows != int64(len(e0)) {
		t.Fatalf("%d duplicate rows, want epoch 0's %d published twice", st.DuplicateRows, len(e0))
	}
}

// TestAppendRollRecordOfAPointNeverMade: process 1 records epoch 0 (an
// in-progress file's prefix), rolls the file and dies before point 0 is
// durable; process 2 resumes from no point at all, so that record is of a
// point never made, and removes the rolled in-progress file its visible
// file shadows; it replays everything and makes point 1. Process 3, from
// point 1, finds the record of epoch 0 (<= 1) naming a file that is gone:
// its roll's visible file holds those rows, so that is no damage. The
// soak campaign found this (seed 10922509485824477530, schedule 10):
// process 3 refused to resume.
func TestAppendRollRecordOfAPointNeverMade(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	s, w, _, e0 := recordedEpoch0(t, f, j)
	must(t, w.(*appendWriter).roll(), "roll")
	must(t, s.Close(), "close") // killed before point 0
	ip := filepath.Join(f.dir, InProgressDir, "part-s0-a0-000000.parquet")
	if _, err := os.Stat(ip); err != nil {
		t.Fatalf("the rolled in-progress file is not there before the second process: %v", err)
	}
	s2 := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	attach(t, s2, j)
	must(t, s2.Recover(-1), "recover from no point")
	if _, err := os.Stat(ip); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the second process kept %s (%v): the test needs it removed, as its roll shadows it", ip, err)
	}
	w2 := f.writer(s2, 0, 1)
	f.write(w2, 1, e0) // the replay writes epoch 0's rows again
	must(t, w2.Flush(1), "flush 1")
	must(t, s2.Commit(1), "commit 1")
	must(t, s2.Close(), "close")
	s3 := rollingSink(t, f, Parquet, RollPolicy{Age: time.Hour})
	defer s3.Close()
	attach(t, s3, j)
	must(t, s3.Recover(1), "recover from point 1")
	_, st := f.wantResolved(e0)
	if st.VisibleRows != 2*int64(len(e0)) {
		t.Fatalf("%d visible rows, want %d: the rolled file and the replay's", st.VisibleRows, 2*len(e0))
	}
}

// TestAppendRollReceipt: a receipt names visible files only, so the
// writer's in-progress file is rolled first.
func TestAppendRollReceipt(t *testing.T) {
	f := newFixture(t)
	r, _ := newRand(t)
	g := newGen(r, 300, 1000)
	s := rollingSink(t, f, CSV, RollPolicy{Age: time.Hour})
	defer s.Close()
	w := f.writer(s, 0, 0)
	rows := g.rows(30)
	f.write(w, 0, rows)
	must(t, w.Flush(0), "flush")
	_, err := s.(Receipter).Receipt(w)
	must(t, err, "receipt")
	if n := len(visibleNames(t, f.dir)); n != 1 {
		t.Fatalf("%d visible files after Receipt, want 1", n)
	}
	f.wantResolved(rows)
	must(t, w.Close(), "close writer")
}

// TestRollPolicyRefused: a negative age or size is an error.
func TestRollPolicyRefused(t *testing.T) {
	f := newFixture(t)
	s := f.open(Append, CSV)
	defer s.Close()
	for _, p := range []RollPolicy{{Age: -time.Second}, {Age: time.Second, Size: -1}} {
		if err := Roll(s, p); err == nil {
			t.Fatalf("Roll(%+v): no error", p)
		}
	}
}

// roll rolls the writer's in-progress file now.
func (w *appendWriter) roll() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	return w.rollLocked()
}

// settle waits for the writer's background roll, if one runs.
func (w *appendWriter) settle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waitSealedLocked()
}
