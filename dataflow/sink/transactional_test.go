package sink

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTransactionalVisibility: flushed rows are staged, not visible; Commit
// publishes exactly the epochs it covers; Flush stages only epochs <= its
// argument.
func TestTransactionalVisibility(t *testing.T) {
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(Transactional, format)
			defer s.Close()
			g := newGen(r, 30, 1000)
			byEpoch := [][][]int64{g.rows(40), g.rows(30), g.rows(50)}
			w := f.writer(s, 0, 0)
			defer w.Close()
			for e, rows := range byEpoch {
				f.write(w, int64(e), rows)
			}
			must(t, w.Flush(1), "flush 1") // stages epochs 0 and 1 only
			got, st := resolve(t, f.dir, f.layout)
			if len(got.Rows) != 0 || st.Files != 0 {
				t.Fatalf("staged rows are visible: %d rows in %d files", len(got.Rows), st.Files)
			}
			staged := dirNames(t, filepath.Join(f.dir, StagingDir))
			if len(staged) != 2 {
				t.Fatalf("staged %v, want one file for each of epochs 0 and 1", staged)
			}

			must(t, s.Commit(0), "commit 0")
			f.wantResolved(byEpoch[0])

			must(t, s.Commit(2), "commit 2") // epoch 2 is still buffered, not staged
			f.wantResolved(slices.Concat(byEpoch[0], byEpoch[1]))

			must(t, w.Flush(2), "flush 2")
			must(t, s.Commit(2), "commit 2 again")
			must(t, s.Commit(2), "commit 2 once more (no-op)")
			must(t, s.Finish(), "finish")
			all := slices.Concat(byEpoch...)
			if _, st := f.wantResolved(all); st.DuplicateRows != 0 || st.Files != 3 {
				t.Errorf("stats %+v, want 3 files, no duplicates", st)
			}
			wantNames := []string{"part-e0-s0-p0" + extOf(format), "part-e1-s0-p0" + extOf(format), "part-e2-s0-p0" + extOf(format)}
			if names := visibleNames(t, f.dir); !slices.Equal(names, wantNames) {
				t.Errorf("visible files %v, want %v", names, wantNames)
			}
			if left := dirNames(t, filepath.Join(f.dir, StagingDir)); len(left) != 0 {
				t.Errorf("staging directory still holds %v", left)
			}
			rows, _ := f.read()
			if !sameMultiset(rows, all) {
				t.Errorf("independent reader sees other rows than written")
			}
		})
	}
}

// TestTransactionalRecover: after a crash the resumed run calls Recover
// with the newest complete epoch: older staged epochs are published, newer
// ones discarded, and the replay of the discarded epochs by a new attempt
// ends with every row exactly once.
func TestTransactionalRecover(t *testing.T) {
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			g := newGen(r, 30, 2000)
			const subtasks = 2
			byEpoch := make([][][][]int64, 4) // [epoch][subtask]rows
			for e := range byEpoch {
				for range subtasks {
					byEpoch[e] = append(byEpoch[e], g.rows(20+r.IntN(20)))
				}
			}

			s := f.open(Transactional, format)
			for i := 0; i < subtasks; i++ {
				w := f.writer(s, i, 0)
				for e := range byEpoch {
					f.write(w, int64(e), byEpoch[e][i])
					must(t, w.Flush(int64(e)), "flush")
				}
				// Epoch 4 rows were written but never flushed: lost.
				f.write(w, 4, g.rows(10))
			}
			must(t, s.Commit(0), "commit 0")
			// Crash: the coordinator only completed the recovery point of
			// epoch 1; epochs 2 and 3 are staged but not covered.
			must(t, s.Close(), "close (crash)")

			s = f.open(Transactional, format)
			defer s.Close()
			// Debris a killed writer can leave: a half-written temporary file.
			must(t, os.WriteFile(filepath.Join(f.dir, StagingDir, tmpPrefix+"e3-s0-a0-123"), []byte("half"), 0o644), "debris")
			must(t, s.Recover(1), "recover 1")
			must(t, s.Recover(1), "recover 1 again")
			if left := dirNames(t, filepath.Join(f.dir, StagingDir)); len(left) != 0 {
				t.Fatalf("after Recover(1) staging holds %v", left)
			}
			var upTo1 [][]int64
			for e := 0; e <= 1; e++ {
				upTo1 = append(upTo1, slices.Concat(byEpoch[e]...)...)
			}
			if _, st := f.wantResolved(upTo1); st.Files != 2*subtasks {
				t.Errorf("%d files after recover, want %d", st.Files, 2*subtasks)
			}

			// Replay of epochs 2 and 3 by attempt 1.
			for i := 0; i < subtasks; i++ {
				w := f.writer(s, i, 1)
				for e := 2; e < 4; e++ {
					f.write(w, int64(e), byEpoch[e][i])
				}
				must(t, w.Flush(3), "flush replay")
				must(t, w.Close(), "close")
			}
			must(t, s.Commit(3), "commit 3")
			var all [][]int64
			for e := range byEpoch {
				all = append(all, slices.Concat(byEpoch[e]...)...)
			}
			_, st := f.wantResolved(all)
			visible, _ := f.read()
			if st.DuplicateRows != 0 || countDuplicates(f.layout, visible) != 0 || !sameMultiset(visible, all) {
				t.Errorf("after replay: stats %+v, independent duplicates %d; want every row exactly once",
					st, countDuplicates(f.layout, visible))
			}

			// Recover with nothing complete discards everything staged.
			w := f.writer(s, 0, 2)
			f.write(w, 5, g.rows(5))
			must(t, w.Flush(5), "flush")
			must(t, w.Close(), "close")
			must(t, s.Recover(4), "recover 4")
			f.wantResolved(all)
		})
	}
}

var errCrash = errors.New("simulated crash")

// crashAtStep makes the transactional sink's publish hook fail with
// errCrash before its step'th publish (counting from 0).
func crashAtStep(ts *txnSink, step int) {
	n := 0
	ts.hook = func(string, string) error {
		if n == step {
			return errCrash
		}
		n++
		return nil
	}
}

// TestTransactionalInterruptedCommit crashes a commit before every single
// publish (rename) it makes, then lets a fresh sink
// finish it: in every case each staged file ends visible exactly once, the
// staging directory is empty, and no row is duplicated or lost.
func TestTransactionalInterruptedCommit(t *testing.T) {
	r, _ := newRand(t)
	g := newGen(r, 1000, 10000)
	const subtasks, epochs = 2, 3
	input := make(map[[2]int][][]int64)
	var all [][]int64
	for e := 0; e < epochs; e++ {
		for i := 0; i < subtasks; i++ {
			rows := g.rows(10 + r.IntN(10))
			input[[2]int{e, i}] = rows
			all = append(all, rows...)
		}
	}
	steps := subtasks * epochs // one publish per staged file
	for crashAt := 0; crashAt < steps; crashAt++ {
		t.Run(fmt.Sprintf("crash-before-step-%d", crashAt), func(t *testing.T) {
			f := newFixture(t)
			s := f.open(Transactional, Parquet)
			for i := 0; i < subtasks; i++ {
				w := f.writer(s, i, 0)
				for e := 0; e < epochs; e++ {
					f.write(w, int64(e), input[[2]int{e, i}])
				}
				must(t, w.Flush(epochs-1), "flush")
				must(t, w.Close(), "close")
			}
			crashAtStep(s.(*txnSink), crashAt)
			if err := s.Commit(epochs - 1); !errors.Is(err, errCrash) {
				t.Fatalf("commit with crash at step %d: %v", crashAt, err)
			}
			must(t, s.Close(), "close (crash)")

			s = f.open(Transactional, Parquet)
			defer s.Close()
			must(t, s.Commit(epochs-1), "commit after crash")
			if left := dirNames(t, filepath.Join(f.dir, StagingDir)); len(left) != 0 {
				t.Fatalf("staging still holds %v", left)
			}
			if names := visibleNames(t, f.dir); len(names) != subtasks*epochs {
				t.Fatalf("visible files %v, want %d", names, subtasks*epochs)
			}
			_, st := f.wantResolved(all)
			visible, _ := f.read()
			if st.DuplicateRows != 0 || !sameMultiset(visible, all) {
				t.Fatalf("stats %+v; visible rows are not each written row exactly once", st)
			}
		})
	}
}

// TestTransactionalRedeliveryReplaces: an executor that re-delivers an
// epoch after a crash (a new attempt producing the same rows for the same
// subtask) replaces what the earlier attempt published instead of adding to
// it, while a second flush of one epoch within an attempt gets its own part.
func TestTransactionalRedeliveryReplaces(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	g := newGen(r, 1000, 1000)
	parts := [][][]int64{g.rows(10), g.rows(10)}
	for attempt := 0; attempt < 2; attempt++ {
		s := f.open(Transactional, CSV)
		must(t, s.Recover(-1), "recover")
		w := f.writer(s, 0, attempt)
		for _, rows := range parts { // the same epoch flushed twice
			f.write(w, 0, rows)
			must(t, w.Flush(0), "flush")
		}
		must(t, s.Commit(0), "commit")
		must(t, s.Close(), "close")
	}
	names := visibleNames(t, f.dir)
	if want := []string{"part-e0-s0-p0.csv", "part-e0-s0-p1.csv"}; !slices.Equal(names, want) {
		t.Fatalf("visible %v, want %v", names, want)
	}
	rows, _ := f.read()
	if !sameMultiset(rows, slices.Concat(parts...)) {
		t.Fatalf("re-delivery left %d visible rows, want the %d rows of one delivery", len(rows), 20)
	}
	_, st := resolve(t, f.dir, f.layout)
	if st.DuplicateRows != 0 {
		t.Fatalf("re-delivery made %d duplicate rows", st.DuplicateRows)
	}
}

func TestParseStaged(t *testing.T) {
	good := stagedFile{stageKey: stageKey{epoch: 12, subtask: 3, attempt: 4}, part: 5, name: "e12-s3-a4-p5.parquet"}
	if f, ok := parseStaged(good.name); !ok || f != good {
		t.Errorf("parseStaged(%q) = %+v, %v", good.name, f, ok)
	}
	for _, bad := range []string{"e12-s3-a4-p5.txt", "e12-s3-a4.csv", "e012-s3-a4-p5.csv", "e-1-s3-a4-p5.csv", "x12-s3-a4-p5.csv", "e12-s3-a4-p5-q1.csv", "e+1-s3-a4-p5.csv"} {
		if f, ok := parseStaged(bad); ok {
			t.Errorf("parseStaged(%q) accepted: %+v", bad, f)
		}
	}
	// A foreign file in the staging directory stops Commit with a clear error.
	f := newFixture(t)
	s := f.open(Transactional, CSV)
	defer s.Close()
	must(t, os.WriteFile(filepath.Join(f.dir, StagingDir, "notes.txt"), nil, 0o644), "write")
	if err := s.Commit(1); err == nil {
		t.Fatalf("commit with a foreign file in staging succeeded")
	}
}

// TestNoHardLinks runs append and transactional publishing on the
// fallback for filesystems without hard links (check, then rename), and
// a commit interrupted there, then re-run.
func TestNoHardLinks(t *testing.T) {
	old := hardLink
	hardLink = func(string, string) error { return &os.LinkError{Op: "link", Err: errors.ErrUnsupported} }
	defer func() { hardLink = old }()
	for _, mode := range []Mode{Append, Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			g := newGen(r, 50, 1000)
			s := f.open(mode, CSV)
			var all [][]int64
			for i := 0; i < 2; i++ {
				w := f.writer(s, i, 0)
				for e := int64(0); e < 3; e++ {
					rows := g.rows(15)
					all = append(all, rows...)
					f.write(w, e, rows)
					must(t, w.Flush(e), "flush")
				}
				must(t, w.Close(), "close")
			}
			if ts, ok := s.(*txnSink); ok {
				crashAtStep(ts, 3)
				if err := s.Commit(2); !errors.Is(err, errCrash) {
					t.Fatalf("interrupted commit: %v", err)
				}
				ts.hook = nil
			}
			must(t, s.Commit(2), "commit")
			must(t, s.Close(), "close")
			if mode == Transactional {
				if left := dirNames(t, filepath.Join(f.dir, StagingDir)); len(left) != 0 {
					t.Errorf("staging still holds %v", left)
				}
			}
			if hidden := slices.DeleteFunc(dirNames(t, f.dir), func(n string) bool { return isVisible(n) || n == StagingDir }); len(hidden) != 0 {
				t.Errorf("leftover hidden files %v", hidden)
			}
			rows, _ := f.read()
			if !sameMultiset(rows, all) || countDuplicates(f.layout, rows) != 0 {
				t.Errorf("visible rows are not each written row exactly once")
			}
		})
	}
}

// TestTransactionalPublishedAfter: PublishedAfter reads back exactly the
// rows of the published epochs beyond its argument, and the greatest
// published epoch; staged epochs and other visible names do not count.
func TestTransactionalPublishedAfter(t *testing.T) {
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(Transactional, format)
			defer s.Close()
			p, ok := s.(EpochPublisher)
			if !ok {
				t.Fatal("the transactional sink is not an EpochPublisher")
			}
			last, rows, err := p.PublishedAfter(-1)
			must(t, err, "published after -1 (empty)")
			if last != -1 || len(rows) != 0 {
				t.Fatalf("empty sink: last %d, %d rows", last, len(rows))
			}
			g := newGen(r, 30, 1000)
			byEpoch := [][][]int64{g.rows(40), g.rows(30), g.rows(50), g.rows(20)}
			for sub := 0; sub < 2; sub++ {
				w := f.writer(s, sub, 0)
				for e, rows := range byEpoch {
					f.write(w, int64(e), rows[sub*len(rows)/2:(sub+1)*len(rows)/2])
				}
				must(t, w.Flush(3), "flush")
				must(t, w.Close(), "close")
			}
			must(t, s.Commit(2), "commit 2") // epoch 3 stays staged
			must(t, os.WriteFile(filepath.Join(f.dir, "part-other"+extOf(format)), nil, 0o644), "foreign file")
			for after, want := range map[int64][][]int64{-1: slices.Concat(byEpoch[:3]...), 0: slices.Concat(byEpoch[1:3]...), 2: nil} {
				last, rows, err := p.PublishedAfter(after)
				must(t, err, "published after")
				if last != 2 {
					t.Errorf("after %d: last published epoch %d, want 2", after, last)
				}
				if !sameMultiset(rows, want) {
					t.Errorf("after %d: read back %d rows, want the %d of the published epochs beyond it", after, len(rows), len(want))
				}
			}
		})
	}
}
