package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// appendKilled flushes three files per subtask with a journal: two before
// Commit(0) (journaled, covered by recovery point 0) and one after (no
// record lists it), then closes the sink as a killed process leaves it.
func appendKilled(t *testing.T, f *fixture, j *Journal, format Format) [][]int64 {
	t.Helper()
	r, _ := newRand(t)
	g := newGen(r, 500, 1000)
	s := f.open(Append, format)
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	var all [][]int64
	ws := []Writer{f.writer(s, 0, 0), f.writer(s, 1, 0)}
	for i := 0; i < 3; i++ {
		if i == 2 {
			must(t, s.Commit(0), "commit 0")
		}
		for _, w := range ws {
			rows := g.rows(30)
			all = append(all, rows...)
			f.write(w, 0, rows)
			must(t, w.Flush(0), "flush")
		}
	}
	for _, w := range ws {
		must(t, w.Close(), "close writer")
	}
	must(t, s.Close(), "close")
	return all
}

// TestAppendJournal: a resumed append sink refuses a file a recovery point
// covers that is missing or changed, naming it; damage to a file no record
// lists is left to the replay (its rows are written again).
func TestAppendJournal(t *testing.T) {
	journaled := func(f *fixture) string { return filepath.Join(f.dir, "part-s1-a0-000001.parquet") }
	unjournaled := func(f *fixture) string { return filepath.Join(f.dir, "part-s0-a0-000002.parquet") }
	cases := []struct {
		name   string
		damage func(f *fixture) string // the path the refusal names ("": none)
	}{
		{"intact", func(*fixture) string { return "" }},
		{"journaled-deleted", func(f *fixture) string { p := journaled(f); must(f.t, os.Remove(p), "rm"); return p }},
		{"journaled-flipped", func(f *fixture) string { p := journaled(f); flipByte(f.t, p, 100); return p }},
		{"journaled-truncated", func(f *fixture) string { p := journaled(f); must(f.t, os.Truncate(p, 10), "truncate"); return p }},
		// No record lists it: left as it is for the replay, which writes its
		// rows again.
		{"unjournaled-deleted", func(f *fixture) string { must(f.t, os.Remove(unjournaled(f)), "rm"); return "" }},
		{"unjournaled-flipped", func(f *fixture) string { flipByte(f.t, unjournaled(f), 100); return "" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			all := appendKilled(t, f, j, Parquet)
			path := c.damage(f)
			s := f.open(Append, Parquet)
			defer s.Close()
			attach(t, s, j)
			err := s.Recover(0)
			if path != "" {
				wantRefusal(t, err, path, "recover")
				if !strings.Contains(err.Error(), "30 rows") {
					t.Fatalf("refusal %q does not say what the recovery point says the file held", err)
				}
				return
			}
			must(t, err, "recover")
			if c.name == "unjournaled-flipped" {
				if _, err := os.Stat(unjournaled(f)); err != nil {
					t.Fatalf("the unlisted damaged file was not left as it is: %v", err)
				}
			}
			if c.name == "intact" {
				f.wantResolved(all)
			}
		})
	}
}

// TestAppendJournalNewerRecordNotChecked: a record of an epoch newer than
// the recovery point resumed from covers rows the replay writes again.
func TestAppendJournalNewerRecordNotChecked(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	appendKilled(t, f, j, CSV)
	must(t, os.Remove(filepath.Join(f.dir, "part-s0-a0-000000.csv")), "rm")
	s := f.open(Append, CSV)
	defer s.Close()
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
}

// TestAppendJournalOnePutPerCommit: the record is written at Commit, once,
// listing every file flushed since the previous one.
func TestAppendJournalOnePutPerCommit(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	appendKilled(t, f, j, CSV)
	names, err := j.list(appendRecordDir)
	must(t, err, "list")
	if len(names) != 1 {
		t.Fatalf("%d records %v after one commit, want 1", len(names), names)
	}
	b, err := j.get(names[0])
	must(t, err, "get")
	r, err := decodeAppendRecord(strings.TrimPrefix(names[0], appendRecordDir), b)
	must(t, err, "decode")
	if len(r.Files) != 4 || r.Epoch != 0 {
		t.Fatalf("record %+v, want epoch 0 listing 4 files", r)
	}
}

// TestAppendJournalBadRecordRefused: a record that is not one (a hand
// edit, another version) is refused at Attach, naming it.
func TestAppendJournalBadRecordRefused(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	appendKilled(t, f, j, CSV)
	rel := appendRecordDir + appendRecordName(7)
	must(t, j.put(rel, []byte(`{"v":1,"epoch":8,"files":[]}`)), "put")
	s := f.open(Append, CSV)
	defer s.Close()
	err := s.(Attacher).Attach(j)
	if err == nil || !strings.Contains(err.Error(), rel) {
		t.Fatalf("attach: %v; want a refusal naming %s", err, rel)
	}
}
