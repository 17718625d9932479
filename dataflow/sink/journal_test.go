package sink

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// journalFor opens a local store under dir and the journal of one run in it.
func journalFor(t *testing.T, dir string) *Journal {
	t.Helper()
	st, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return NewJournal(context.Background(), st, "test/job/run-1/")
}

func attach(t *testing.T, s Sink, j *Journal) {
	t.Helper()
	must(t, s.(Attacher).Attach(j), "attach")
}

// wantRefusal fails unless err is one line naming path.
func wantRefusal(t *testing.T, err error, path, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want a refusal naming %s", what, path)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, "\n") || !strings.Contains(msg, "--resume") {
		t.Fatalf("%s: error %q; want one line naming %s and what to do", what, msg, path)
	}
}

// txnKilled stages epochs 0 and 1 of two subtasks with a journal,
// publishes epoch 0 and closes the sink as a killed process would leave
// it: epoch 1 staged, covered by a recovery point.
func txnKilled(t *testing.T, f *fixture, j *Journal, format Format) [][]int64 {
	t.Helper()
	r, _ := newRand(t)
	g := newGen(r, 500, 1000)
	s := f.open(Transactional, format)
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	var all [][]int64
	for sub := 0; sub < 2; sub++ {
		w := f.writer(s, sub, 0)
		for e := int64(0); e < 2; e++ {
			rows := g.rows(30)
			all = append(all, rows...)
			f.write(w, e, rows)
			must(t, w.Flush(e), "flush")
		}
		must(t, w.Close(), "close writer")
	}
	must(t, s.Commit(0), "commit 0")
	must(t, s.Close(), "close")
	return all
}

// TestTransactionalJournal: a resumed transactional sink publishes a
// committed staged epoch only when it is what its entry says, refuses a
// missing or damaged one (and a deleted published file) naming it, and
// drops damage to epochs no recovery point covers.
func TestTransactionalJournal(t *testing.T) {
	staged := func(f *fixture) string { return filepath.Join(f.dir, StagingDir, "e1-s1-a0-p0.parquet") }
	cases := []struct {
		name     string
		damage   func(f *fixture) string // returns the path the refusal names ("": none)
		complete int64
	}{
		{"intact", func(*fixture) string { return "" }, 1},
		{"staged-deleted", func(f *fixture) string { p := staged(f); must(f.t, os.Remove(p), "rm"); return p }, 1},
		{"staged-flipped", func(f *fixture) string { p := staged(f); flipByte(f.t, p, 100); return p }, 1},
		{"staged-truncated", func(f *fixture) string { p := staged(f); must(f.t, os.Truncate(p, 10), "truncate"); return p }, 1},
		{"published-deleted", func(f *fixture) string {
			p := filepath.Join(f.dir, "part-e0-s0-p0.parquet")
			must(f.t, os.Remove(p), "rm")
			return p
		}, 1},
		{"published-truncated", func(f *fixture) string {
			p := filepath.Join(f.dir, "part-e0-s1-p0.parquet")
			must(f.t, os.Truncate(p, 10), "truncate")
			return p
		}, 1},
		{"foreign-staged", func(f *fixture) string {
			p := filepath.Join(f.dir, StagingDir, "e1-s5-a0-p0.parquet")
			data, err := os.ReadFile(staged(f))
			must(f.t, err, "read")
			must(f.t, os.WriteFile(p, data, 0o644), "write")
			return p
		}, 1},
		// Not covered by a recovery point: discarded and produced again.
		{"uncommitted-staged-deleted", func(f *fixture) string { must(f.t, os.Remove(staged(f)), "rm"); return "" }, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			all := txnKilled(t, f, j, Parquet)
			path := c.damage(f)
			s := f.open(Transactional, Parquet)
			defer s.Close()
			attach(t, s, j)
			err := s.Recover(c.complete)
			if path == "" {
				must(t, err, "recover")
				if c.complete == 1 {
					f.wantResolved(all)
				}
				return
			}
			wantRefusal(t, err, path, "recover")
			if strings.Contains(path, StagingDir) && !strings.Contains(c.name, "foreign") {
				if _, err := os.Stat(filepath.Join(f.dir, "part-e1-s1-p0.parquet")); err == nil {
					t.Fatalf("the damaged staged file was published")
				}
			}
		})
	}
}

// TestTransactionalPublishedAfterChecksFiles: a published file whose bytes
// changed (same size) is refused where it is read back.
func TestTransactionalPublishedAfterChecksFiles(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	txnKilled(t, f, j, CSV)
	s := f.open(Transactional, CSV)
	defer s.Close()
	attach(t, s, j)
	must(t, s.Recover(1), "recover")
	p := filepath.Join(f.dir, "part-e1-s0-p0.csv")
	flipByte(t, p, 40)
	_, _, err := s.(EpochPublisher).PublishedAfter(0)
	wantRefusal(t, err, p, "published after")
}

func flipByte(t testing.TB, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err, "read")
	b[at%len(b)] ^= 0x20
	must(t, os.WriteFile(path, b, 0o644), "write")
}

// idemKilled writes rows into an idempotent store with a journal, commits
// and closes it as a killed process leaves it.
func idemKilled(t *testing.T, f *fixture, j *Journal) [][]int64 {
	t.Helper()
	return idemKilledRows(t, f, j, 200, 1000, 300)
}

// idemKilledRows is idemKilled with n rows over keys keys, drawn from
// total versions.
func idemKilledRows(t *testing.T, f *fixture, j *Journal, keys int64, total, n int) [][]int64 {
	t.Helper()
	r, _ := newRand(t)
	g := newGen(r, keys, total)
	s := f.open(Idempotent, Parquet)
	attach(t, s, j)
	w := f.writer(s, 0, 0)
	rows := g.rows(n)
	f.write(w, 0, rows)
	must(t, w.Flush(0), "flush")
	// Killed once the applier has moved the rows into the store, so the
	// damage done to the store's file hits them (idemlog_test.go damages
	// a log that still holds them).
	must(t, s.(*idempotentSink).ap.drain(), "drain")
	must(t, w.Close(), "close writer")
	must(t, s.Commit(0), "commit")
	must(t, s.Close(), "close")
	return rows
}

// TestIdempotentJournal: a resumed idempotent sink refuses a store that
// is not the run's (deleted, truncated, replaced) or lost rows, and
// reports a damaged store, never panicking.
func TestIdempotentJournal(t *testing.T) {
	store := func(f *fixture) string { return filepath.Join(f.dir, IdempotentStore) }
	cases := []struct {
		name   string
		damage func(f *fixture) string
	}{
		{"intact", func(*fixture) string { return "" }},
		{"deleted", func(f *fixture) string { must(f.t, os.Remove(store(f)), "rm"); return store(f) }},
		{"truncated", func(f *fixture) string { must(f.t, os.Truncate(store(f), 0), "truncate"); return store(f) }},
		{"replaced", func(f *fixture) string {
			other := newFixture(f.t)
			s := other.open(Idempotent, Parquet)
			must(f.t, s.Close(), "close other")
			data, err := os.ReadFile(store(other))
			must(f.t, err, "read")
			must(f.t, os.WriteFile(store(f), data, 0o644), "write")
			return store(f)
		}},
		{"manifest-flipped", func(f *fixture) string { flipAt(f.t, store(f), 20); return store(f) }},
		{"run-overwritten", func(f *fixture) string {
			p := runFiles(f.t, f.dir)[0]
			b, err := os.ReadFile(p)
			must(f.t, err, "read")
			for i := idemRunHeaderLen; i < len(b); i++ {
				b[i] = 0xEF
			}
			must(f.t, os.WriteFile(p, b, 0o644), "write")
			return p
		}},
		{"run-deleted", func(f *fixture) string {
			p := runFiles(f.t, f.dir)[0]
			must(f.t, os.Remove(p), "rm")
			return p
		}},
		{"run-header-flipped", func(f *fixture) string {
			p := runFiles(f.t, f.dir)[0]
			flipAt(f.t, p, 9)
			return p
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			rows := idemKilled(t, f, j)
			path := c.damage(f)
			s, err := Open(f.dir, Idempotent, Parquet, f.layout, f.mem)
			if err == nil {
				defer s.Close()
				err = s.(Attacher).Attach(j)
			}
			if path == "" {
				must(t, err, "open and attach")
				must(t, s.Finish(), "finish")
				f.wantResolved(rows)
				return
			}
			wantRefusal(t, err, path, "open and attach")
		})
	}
}

// TestIdempotentRowChecksum: a flipped byte inside a stored row's value
// is found by the open's check of every run against its manifest entry.
func TestIdempotentRowChecksum(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	rows := idemKilled(t, f, j)
	// Find one stored row by its key bytes (k1, k2 with the sign bit
	// flipped, as the store encodes them) and flip a byte of its value.
	p := runFiles(t, f.dir)[0]
	b, err := os.ReadFile(p)
	must(t, err, "read")
	var key [16]byte
	binary.BigEndian.PutUint64(key[0:], uint64(rows[0][0])^(1<<63))
	binary.BigEndian.PutUint64(key[8:], uint64(rows[0][1])^(1<<63))
	at := strings.LastIndex(string(b), string(key[:]))
	if at < 0 {
		t.Fatalf("key %x not found in %s", key, p)
	}
	b[at+len(key)+20] ^= 0x01 // inside the value's columns
	must(t, os.WriteFile(p, b, 0o644), "write")
	s, err := Open(f.dir, Idempotent, Parquet, f.layout, f.mem)
	if err == nil {
		defer s.Close()
		attach(t, s, j)
		err = s.Finish()
	}
	wantRefusal(t, err, p, "open or finish")
	if !strings.Contains(err.Error(), "damaged embedded store") {
		t.Fatalf("finish: %v; want it called a damaged embedded store", err)
	}
}

// TestIdempotentTruncatedStoreIsRefused: a run cut short is refused as
// damaged, naming the file, whatever the cut (the soak campaign once found
// a truncated store killing the process).
func TestIdempotentTruncatedStoreIsRefused(t *testing.T) {
	for _, frac := range []float64{0.3, 0.5, 0.7, 0.9} {
		t.Run(fmt.Sprint(frac), func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			idemKilledRows(t, f, j, 20000, 30000, 30000)
			path := runFiles(t, f.dir)[0]
			fi, err := os.Stat(path)
			must(t, err, "stat")
			must(t, os.Truncate(path, int64(float64(fi.Size())*frac)), "truncate")
			s, err := Open(f.dir, Idempotent, Parquet, f.layout, f.mem)
			if err == nil {
				defer s.Close()
				err = s.(Attacher).Attach(j)
			}
			// A run has no unused tail: every cut is damage.
			wantRefusal(t, err, path, "open and attach")
		})
	}
}
