package sink

import "testing"

// TestAppendJournalKeepsNoRecordsAfterRecover: once the process's first
// Recover has checked the destination, committed records are written to
// the journal but not kept in memory, which would otherwise grow with
// every file a long run writes; a resumed sink still reads them all.
func TestAppendJournalKeepsNoRecordsAfterRecover(t *testing.T) {
	r, _ := newRand(t)
	g := newGen(r, 500, 1000)
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	s := f.open(Append, CSV)
	attach(t, s, j)
	must(t, s.Recover(-1), "recover")
	w := f.writer(s, 0, 0)
	const commits = 20
	var all [][]int64
	for e := range int64(commits) {
		rows := g.rows(5)
		all = append(all, rows...)
		f.write(w, e, rows)
		must(t, w.Flush(e), "flush")
		must(t, s.Commit(e), "commit")
	}
	if n := len(s.(*appendSink).aj.records); n != 0 {
		t.Fatalf("%d records kept in memory after Recover, want 0", n)
	}
	must(t, w.Close(), "close writer")
	must(t, s.Close(), "close")
	names, err := j.list(appendRecordDir)
	must(t, err, "list")
	if len(names) != commits {
		t.Fatalf("%d records in the journal, want %d", len(names), commits)
	}
	resumed := f.open(Append, CSV)
	defer resumed.Close()
	attach(t, resumed, j)
	if n := len(resumed.(*appendSink).aj.records); n != commits {
		t.Fatalf("a resumed sink read %d records, want %d", n, commits)
	}
	must(t, resumed.Recover(commits-1), "recover the resumed sink")
	f.wantResolved(all)
}
