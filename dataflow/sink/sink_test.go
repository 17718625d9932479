package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestRoundTrip drives every mode and format the way an executor does:
// several subtasks, several epochs, flush and commit per epoch, Finish,
// then checks the resolved directory against the in-memory oracle and the
// files themselves against an independent reader.
func TestRoundTrip(t *testing.T) {
	for _, mode := range Modes {
		for _, format := range formats {
			t.Run(fmt.Sprintf("%s/%s", mode, format), func(t *testing.T) {
				r, _ := newRand(t)
				f := newFixture(t)
				f.dir = filepath.Join(f.dir, "out") // one Open has to create
				s := f.open(mode, format)
				defer s.Close()
				if s.Mode() != mode {
					t.Fatalf("Mode() = %s, want %s", s.Mode(), mode)
				}
				old := exportChunk
				exportChunk = 7 // the idempotent export crosses many chunks
				defer func() { exportChunk = old }()
				const subtasks, epochs = 3, 5
				g := newGen(r, 40, subtasks*epochs*100)
				ws := make([]Writer, subtasks)
				for i := range ws {
					ws[i] = f.writer(s, i, 0)
				}
				var all [][]int64
				for e := int64(0); e < epochs; e++ {
					for i, w := range ws {
						// Two batches per epoch, one with permuted columns.
						a, b := g.rows(1+r.IntN(60)), g.rows(r.IntN(40))
						f.write(w, e, a)
						bb := batchOf(t, f.mem, f.layout, b, []int{3, 2, 1, 0})
						must(t, w.Write(e, bb), "write permuted")
						bb.Release()
						all = append(all, a...)
						all = append(all, b...)
						must(t, w.Flush(e), fmt.Sprintf("flush subtask %d epoch %d", i, e))
					}
					must(t, s.Commit(e), "commit")
				}
				for _, w := range ws {
					must(t, w.Close(), "close writer")
				}
				must(t, s.Finish(), "finish")

				// Temporary files are gone once every publish returned.
				if debris := slices.DeleteFunc(dirNames(t, f.dir), func(n string) bool {
					_, run := runNumber(n)
					return isVisible(n) || n == StagingDir || n == IdempotentStore || n == IdempotentLog || n == idemLockName || run
				}); len(debris) != 0 {
					t.Errorf("hidden files left behind: %v", debris)
				}
				want, st := f.wantResolved(all)
				files, nfiles := f.read()
				if st.Files != nfiles {
					t.Errorf("Stats.Files = %d, independent count %d", st.Files, nfiles)
				}
				switch mode {
				case Idempotent:
					if st.DuplicateRows != 0 || st.VisibleRows != int64(len(want.Rows)) || st.Files != 1 {
						t.Errorf("idempotent stats %+v, want 0 duplicates, %d rows in 1 file", st, len(want.Rows))
					}
					if !sameMultiset(files, want.Rows) {
						t.Errorf("idempotent export holds other rows than the resolved table")
					}
				default:
					_, wantSt := oracle(t, f.layout, all)
					if !sameMultiset(files, all) {
						t.Errorf("visible files hold %d rows that are not the %d written", len(files), len(all))
					}
					if st.VisibleRows != int64(len(all)) || st.DuplicateRows != wantSt.DuplicateRows {
						t.Errorf("stats %+v, want %d visible rows and %d duplicates", st, len(all), wantSt.DuplicateRows)
					}
				}
			})
		}
	}
}

// TestParquetSchemaForArrow checks the Parquet files carry the layout's
// columns in layout order as required int64, as seen by arrow-go, including
// a file with no rows (an empty idempotent export).
func TestParquetSchemaForArrow(t *testing.T) {
	f := newFixture(t)
	s := f.open(Idempotent, Parquet)
	must(t, s.Finish(), "finish empty")
	must(t, s.Close(), "close")
	rows, n := f.read() // checks names, order, types
	if n != 1 || len(rows) != 0 {
		t.Fatalf("empty export: %d files, %d rows; want 1 file, 0 rows", n, len(rows))
	}
	got, st := resolve(t, f.dir, f.layout)
	if len(got.Rows) != 0 || st.Files != 1 {
		t.Fatalf("empty export resolved to %d rows in %d files", len(got.Rows), st.Files)
	}

	// Enough rows for several pages and row groups of parquet-go's writer.
	old := parquetRowGroup
	parquetRowGroup = 7000 // not a multiple of parquetChunk, on purpose
	defer func() { parquetRowGroup = old }()
	r, _ := newRand(t)
	f.dir = t.TempDir() // a second sink, in a directory of its own
	s = f.open(Append, Parquet)
	defer s.Close()
	w := f.writer(s, 0, 0)
	g := newGen(r, 1<<40, 3*parquetRowGroup+5000)
	all := g.rows(3*parquetRowGroup + 5000)
	for off := 0; off < len(all); off += 5000 {
		f.write(w, 0, all[off:min(off+5000, len(all))])
	}
	must(t, w.Flush(0), "flush")
	rows, _ = f.read()
	if !sameMultiset(rows, all) {
		t.Fatalf("arrow read %d rows, not the %d written", len(rows), len(all))
	}
	f.wantResolved(all)
	if groups := parquetRowGroups(t, filepath.Join(f.dir, visibleNames(t, f.dir)[0])); groups != 4 {
		t.Errorf("file has %d row groups, want 4", groups)
	}
}

// TestAppendReplay replays epochs in a second attempt, as an executor does
// after a crash: the resolved table is still right, and the duplicates are
// visible and counted exactly as an independent reader counts them.
func TestAppendReplay(t *testing.T) {
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(Append, format)
			defer s.Close()
			g := newGen(r, 25, 1000)
			byEpoch := [][][]int64{g.rows(80), g.rows(120), g.rows(90)}
			var all [][]int64
			for _, rows := range byEpoch {
				all = append(all, rows...)
			}

			w0 := f.writer(s, 0, 0)
			for e, rows := range byEpoch {
				f.write(w0, int64(e), rows)
				must(t, w0.Flush(int64(e)), "flush")
			}
			// The crash: attempt 0 is gone after its flush of epoch 2, but the
			// restored recovery point covers only epoch 0, so epochs 1 and 2
			// are produced again by attempt 1.
			must(t, w0.Close(), "close")
			w1 := f.writer(s, 0, 1)
			for e := 1; e < 3; e++ {
				f.write(w1, int64(e), byEpoch[e])
				must(t, w1.Flush(int64(e)), "flush replay")
			}
			must(t, w1.Close(), "close")
			must(t, s.Finish(), "finish")

			_, st := f.wantResolved(all)
			visible, nfiles := f.read()
			indep := countDuplicates(f.layout, visible)
			if st.DuplicateRows != indep {
				t.Errorf("DuplicateRows = %d, independent count %d", st.DuplicateRows, indep)
			}
			if replayed := int64(len(byEpoch[1]) + len(byEpoch[2])); indep != replayed {
				t.Errorf("independent duplicate count %d, want the %d replayed rows", indep, replayed)
			}
			if st.VisibleRows != int64(len(visible)) || st.Files != nfiles || nfiles != 5 {
				t.Errorf("stats %+v; independent reader saw %d rows in %d files, want 5 files", st, len(visible), nfiles)
			}
		})
	}
}

// TestAppendDroppedWriter: rows a writer never flushed die with it, whether
// the writer is closed or the sink is closed under it.
func TestAppendDroppedWriter(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	s := f.open(Append, Parquet)
	g := newGen(r, 10, 500)
	kept := g.rows(30)

	w0 := f.writer(s, 0, 0)
	f.write(w0, 0, kept)
	must(t, w0.Flush(0), "flush")
	f.write(w0, 1, g.rows(40)) // never flushed
	must(t, w0.Close(), "close")
	if err := w0.Flush(1); err == nil {
		t.Errorf("flush after close succeeded")
	}

	w1 := f.writer(s, 1, 0)
	f.write(w1, 0, g.rows(50)) // never flushed, never closed
	if f.mem.CurrentAlloc() == 0 {
		t.Fatalf("buffered rows should hold allocator memory")
	}
	must(t, s.Close(), "close sink")
	empty := batchOf(t, f.mem, f.layout, nil, nil)
	if err := w1.Write(0, empty); err == nil {
		t.Errorf("write after sink close succeeded")
	}
	empty.Release()
	if _, err := s.Writer(2, 0); err == nil {
		t.Errorf("Writer after sink close succeeded")
	}

	if _, st := f.wantResolved(kept); st.Files != 1 || st.VisibleRows != int64(len(kept)) {
		t.Errorf("stats %+v, want 1 file with %d rows", st, len(kept))
	}
}

// TestAppendNamesNeverCollide: a new sink over the same directory with the
// same subtask and attempt numbers (a restarted process that reuses them)
// must not overwrite earlier files.
func TestAppendNamesNeverCollide(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	g := newGen(r, 10, 500)
	var all [][]int64
	for run := 0; run < 2; run++ {
		s := f.open(Append, CSV)
		w := f.writer(s, 0, 0)
		for e := int64(0); e < 2; e++ {
			rows := g.rows(20)
			all = append(all, rows...)
			f.write(w, e, rows)
			must(t, w.Flush(e), "flush")
		}
		must(t, s.Close(), "close")
	}
	if n := len(visibleNames(t, f.dir)); n != 4 {
		t.Fatalf("%d visible files, want 4: %v", n, visibleNames(t, f.dir))
	}
	rows, _ := f.read()
	if !sameMultiset(rows, all) {
		t.Fatalf("visible rows are not the %d written", len(all))
	}
}

// TestIdempotentReplayAndOrder writes versions out of order across
// subtasks and flushes, replays some flushes verbatim, and checks one row
// per key with the greatest version survives, with no duplicates.
func TestIdempotentReplayAndOrder(t *testing.T) {
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(Idempotent, format)
			defer s.Close()
			g := newGen(r, 30, 3000) // versions arrive shuffled
			var all [][]int64
			ws := []Writer{}
			for i := 0; i < 3; i++ {
				ws = append(ws, f.writer(s, i, 0))
			}
			for e := int64(0); e < 6; e++ {
				for _, w := range ws {
					rows := g.rows(1 + r.IntN(50))
					all = append(all, rows...)
					f.write(w, e, rows)
					if r.IntN(3) == 0 { // replay: same rows again, same flush
						f.write(w, e, rows)
					}
					must(t, w.Flush(e), "flush")
					if r.IntN(3) == 0 { // replay in a later flush
						f.write(w, e, rows)
						must(t, w.Flush(e), "flush replay")
					}
				}
			}
			// Stale versions written last must not win.
			want, _ := oracle(t, f.layout, all)
			stale := make([][]int64, 0, len(want.Rows))
			for _, row := range want.Rows {
				old := slices.Clone(row)
				old[2] -= 1
				old[3] = 12345
				stale = append(stale, old)
			}
			f.write(ws[0], 6, stale)
			must(t, ws[0].Flush(6), "flush stale")
			for _, w := range ws {
				must(t, w.Close(), "close writer")
			}
			if got, _ := resolve(t, f.dir, f.layout); len(got.Rows) != 0 {
				t.Errorf("before Finish %d rows are visible, want 0", len(got.Rows))
			}
			must(t, s.Finish(), "finish")
			if _, st := f.wantResolved(all); st.DuplicateRows != 0 || st.VisibleRows != int64(len(want.Rows)) {
				t.Errorf("stats %+v, want 0 duplicates and %d visible rows", st, len(want.Rows))
			}
			visible, _ := f.read()
			if d := countDuplicates(f.layout, visible); d != 0 {
				t.Errorf("independent reader counts %d duplicates", d)
			}
		})
	}
}

// TestIdempotentReopen: the store is in the output directory, so a crashed
// sink (closed without Finish, with unflushed rows) can be reopened and
// continued; only flushed rows survive.
func TestIdempotentReopen(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	g := newGen(r, 20, 2000)

	s := f.open(Idempotent, Parquet)
	w := f.writer(s, 0, 0)
	first := g.rows(100)
	f.write(w, 0, first)
	must(t, w.Flush(0), "flush")
	f.write(w, 1, g.rows(100)) // lost in the crash
	must(t, s.Close(), "close (crash)")

	s = f.open(Idempotent, Parquet)
	w = f.writer(s, 0, 1)
	second := g.rows(100)
	f.write(w, 1, second)
	f.write(w, 1, first) // replay of what was already stored
	must(t, w.Flush(1), "flush")
	must(t, s.Finish(), "finish")
	must(t, s.Finish(), "finish again") // replaces the export
	must(t, s.Close(), "close")

	flushed := append(slices.Clone(first), second...)
	if _, st := f.wantResolved(flushed); st.Files != 1 || st.DuplicateRows != 0 {
		t.Errorf("stats %+v, want one export file and no duplicates", st)
	}

	// A later run in the other format replaces the export rather than
	// adding a second copy of every row.
	s = f.open(Idempotent, CSV)
	must(t, s.Finish(), "finish csv")
	must(t, s.Close(), "close")
	_, st := f.wantResolved(flushed)
	if names := visibleNames(t, f.dir); !slices.Equal(names, []string{"part-idempotent.csv"}) || st.DuplicateRows != 0 {
		t.Errorf("visible files %v, stats %+v; want only part-idempotent.csv", names, st)
	}
}

// TestOpenClearsWhatAKilledWriterLeft: a process killed between writing a
// file under its temporary name and publishing it leaves that file (in the
// output or its staging directory); the next Open removes it, and only it.
func TestOpenClearsWhatAKilledWriterLeft(t *testing.T) {
	r, _ := newRand(t)
	for _, mode := range []Mode{Append, Idempotent, Transactional} {
		f := newFixture(t)
		rows := newGen(r, 20, 2000).rows(50)
		s := f.open(mode, Parquet)
		w := f.writer(s, 0, 0)
		f.write(w, 0, rows)
		must(t, w.Flush(0), "flush")
		must(t, s.Commit(0), "commit")
		must(t, s.Finish(), "finish")
		must(t, s.Close(), "close")
		before := visibleNames(t, f.dir)
		dead := []string{filepath.Join(f.dir, tmpPrefix+"part-s0-a1-7.parquet"), filepath.Join(f.dir, StagingDir, tmpPrefix+"e3-s0-a1-0.parquet")}
		for _, d := range dead {
			must(t, os.MkdirAll(filepath.Dir(d), 0o755), "mkdir")
			must(t, os.WriteFile(d, []byte("half a file"), 0o644), "debris")
		}
		s = f.open(mode, Parquet)
		must(t, s.Close(), "close")
		for _, d := range dead {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s survived Open: %v", mode, d, err)
			}
		}
		if after := visibleNames(t, f.dir); !slices.Equal(before, after) {
			t.Errorf("%s: Open changed the visible files: %v, then %v", mode, before, after)
		}
	}
}

// TestIdempotentFinishKilledMidExport: a Finish stopped between writing
// the export and publishing it (a process killed at run.mid-finish) leaves
// the visible output as it was, and the next Finish publishes the export
// and removes the dead one's temporary file.
func TestIdempotentFinishKilledMidExport(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	rows := newGen(r, 20, 2000).rows(100)
	s := f.open(Idempotent, CSV)
	w := f.writer(s, 0, 0)
	f.write(w, 0, rows)
	must(t, w.Flush(0), "flush")
	killed := errors.New("killed")
	err := s.(MidFinisher).FinishWith(func() error {
		// What a SIGKILL here leaves behind: the temporary export.
		entries, _ := os.ReadDir(f.dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tmpPrefix+idempotentExport) {
				b, _ := os.ReadFile(filepath.Join(f.dir, e.Name()))
				must(t, os.WriteFile(filepath.Join(f.dir, tmpPrefix+idempotentExport+".csv-dead"), b, 0o644), "copy")
			}
		}
		return killed
	})
	if !errors.Is(err, killed) || len(visibleNames(t, f.dir)) != 0 {
		t.Fatalf("stopped Finish: %v, visible %v; want the stop's error and nothing visible", err, visibleNames(t, f.dir))
	}
	must(t, s.Close(), "close (crash)")
	s = f.open(Idempotent, CSV)
	must(t, s.Finish(), "finish")
	must(t, s.Close(), "close")
	if _, st := f.wantResolved(rows); st.Files != 1 || st.DuplicateRows != 0 {
		t.Errorf("stats %+v, want one export file and no duplicates", st)
	}
	entries, err := os.ReadDir(f.dir)
	must(t, err, "list")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("%s left in the output directory", e.Name())
		}
	}
}

// TestIdempotentLocked: a second opener gets a clear error once the lock
// timeout passes instead of hanging.
func TestIdempotentLocked(t *testing.T) {
	f := newFixture(t)
	s := f.open(Idempotent, CSV)
	defer s.Close()
	old := storeLockTimeout
	storeLockTimeout = 1 // the lock is held, so any timeout expires
	defer func() { storeLockTimeout = old }()
	_, err := Open(f.dir, Idempotent, CSV, f.layout, f.mem)
	if err == nil || !strings.Contains(err.Error(), "locked") || !strings.Contains(err.Error(), IdempotentStore) {
		t.Fatalf("second open: %v; want a lock error naming the store", err)
	}
}

// TestIdempotentLayoutChange: a store written under one layout refuses
// another, rather than decoding its rows as garbage.
func TestIdempotentLayoutChange(t *testing.T) {
	f := newFixture(t)
	must(t, f.open(Idempotent, CSV).Close(), "close")
	other := testLayout()
	other.WriteKey = []string{"k1"}
	if _, err := Open(f.dir, Idempotent, CSV, other, f.mem); err == nil || !strings.Contains(err.Error(), "layout") {
		t.Fatalf("open with another layout: %v; want a layout mismatch error", err)
	}
}

// TestConcurrentWriters runs subtasks on their own goroutines, as the
// executors do, sharing one sink (and, for idempotent, one store).
// Mostly for the race detector; the result is still checked.
func TestConcurrentWriters(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(mode, Parquet)
			defer s.Close()
			const subtasks, epochs = 4, 4
			g := newGen(r, 50, subtasks*epochs*50)
			input := make([][][][]int64, subtasks) // [subtask][epoch]rows
			var all [][]int64
			for i := range input {
				for e := 0; e < epochs; e++ {
					rows := g.rows(50)
					input[i] = append(input[i], rows)
					all = append(all, rows...)
				}
			}
			for e := 0; e < epochs; e++ {
				var wg sync.WaitGroup
				errs := make([]error, subtasks)
				for i := 0; i < subtasks; i++ {
					wg.Go(func() {
						w, err := s.Writer(i, e) // a fresh attempt per epoch, as after restarts
						if err != nil {
							errs[i] = err
							return
						}
						defer w.Close()
						b := batchOf(t, f.mem, f.layout, input[i][e], nil)
						defer b.Release()
						if err := w.Write(int64(e), b); err != nil {
							errs[i] = err
							return
						}
						errs[i] = w.Flush(int64(e))
					})
				}
				wg.Wait()
				for i, err := range errs {
					must(t, err, fmt.Sprintf("subtask %d epoch %d", i, e))
				}
				must(t, s.Commit(int64(e)), "commit")
			}
			must(t, s.Finish(), "finish")
			if _, st := f.wantResolved(all); st.DuplicateRows != 0 {
				t.Errorf("%d duplicates without any replay", st.DuplicateRows)
			}
		})
	}
}

// TestInputChecks: batches must match the layout; layouts must be usable.
func TestInputChecks(t *testing.T) {
	mem := newMem(t)
	layout := testLayout()
	s := openSink(t, t.TempDir(), Append, CSV, layout, mem)
	defer s.Close()
	w, err := s.Writer(0, 0)
	must(t, err, "writer")
	defer w.Close()

	i64 := arrow.PrimitiveTypes.Int64
	short := arrow.NewSchema([]arrow.Field{{Name: "k1", Type: i64}}, nil)
	b := array.NewInt64Builder(mem)
	b.Append(1)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(short, []arrow.Array{col}, 1)
	col.Release()
	if err := w.Write(0, rec); err == nil || !strings.Contains(err.Error(), "columns") {
		t.Errorf("batch with missing columns: %v", err)
	}
	rec.Release()

	nb := array.NewInt64Builder(mem)
	nb.AppendNull()
	nullCol := nb.NewArray()
	nb.Release()
	var cols []arrow.Array
	for range 4 {
		cols = append(cols, nullCol)
	}
	rec = array.NewRecordBatch(layout.Schema, cols, 1)
	nullCol.Release()
	if err := w.Write(0, rec); err == nil || !strings.Contains(err.Error(), "null") {
		t.Errorf("batch with nulls: %v", err)
	}
	rec.Release()
	empty := batchOf(t, mem, layout, nil, nil)
	if err := w.Write(-1, empty); err == nil {
		t.Errorf("negative epoch accepted")
	}
	empty.Release()

	bad := []struct {
		name   string
		layout Layout
		want   string
	}{
		{"no version", Layout{Schema: arrow.NewSchema([]arrow.Field{{Name: "k", Type: i64}}, nil), WriteKey: []string{"k"}}, VersionColumn},
		{"string column", Layout{Schema: arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: VersionColumn, Type: i64}}, nil), WriteKey: []string{"k"}}, "int64"},
		{"unknown key", Layout{Schema: layout.Schema, WriteKey: []string{"nope"}}, "nope"},
		{"no key", Layout{Schema: layout.Schema}, "empty write key"},
		{"version in key", Layout{Schema: layout.Schema, WriteKey: []string{VersionColumn}}, "must not contain"},
	}
	for _, c := range bad {
		if _, err := Open(t.TempDir(), Append, CSV, c.layout, mem); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Open = %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	if _, err := Open(t.TempDir(), "sometimes", CSV, layout, mem); err == nil {
		t.Errorf("unknown mode accepted")
	}
	if _, err := Open(t.TempDir(), Append, "xlsx", layout, mem); err == nil {
		t.Errorf("unknown format accepted")
	}
	// Open creates missing directories, nested ones included.
	nested := filepath.Join(t.TempDir(), "a", "b")
	s2 := openSink(t, nested, Transactional, CSV, layout, mem)
	must(t, s2.Close(), "close")
	if _, err := os.Stat(filepath.Join(nested, StagingDir)); err != nil {
		t.Errorf("transactional open did not create the staging directory: %v", err)
	}
}

// TestFlushFailure: a flush that cannot write fails with the path in the
// error, and poisons the writer (its rows are in an unknown state, so it
// refuses further use) while returning its memory.
func TestFlushFailure(t *testing.T) {
	for _, mode := range []Mode{Append, Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t)
			f.dir = filepath.Join(f.dir, "out")
			s := f.open(mode, Parquet)
			defer s.Close()
			w := f.writer(s, 0, 0)
			defer w.Close()
			f.write(w, 0, [][]int64{{1, 2, 3, 4}})
			f.write(w, 1, [][]int64{{1, 2, 4, 4}})
			must(t, os.RemoveAll(f.dir), "remove output directory")
			err := w.Flush(0)
			if err == nil || !strings.Contains(err.Error(), f.dir) {
				t.Fatalf("flush into a removed directory: %v; want an error naming it", err)
			}
			// The batches written are released; only the writer's buffers,
			// epoch 1's included, could still hold memory.
			if n := f.mem.CurrentAlloc(); n != 0 {
				t.Errorf("failed writer still holds %d bytes", n)
			}
			b := batchOf(t, f.mem, f.layout, [][]int64{{5, 6, 7, 8}}, nil)
			defer b.Release()
			if err2 := w.Write(2, b); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("write after a failed flush: %v; want the flush error", err2)
			}
		})
	}
}
