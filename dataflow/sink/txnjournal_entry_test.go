package sink

import (
	"testing"
)

// TestTransactionalMissingEntryNamed: a staged file of a covered epoch
// whose journal entry was deleted is refused with a line naming the
// entry, which is what was damaged (soak #906, seed 243613).
func TestTransactionalMissingEntryNamed(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	txnKilled(t, f, j, Parquet)
	rel := stagedEntryDir + "e1-s1-a0-p0.parquet"
	b, err := j.get(rel)
	must(t, err, "get")
	if b == nil {
		t.Fatalf("no journal entry %s to delete: the damage this test is about cannot be made", rel)
	}
	must(t, j.del(rel), "delete the entry")
	s := f.open(Transactional, Parquet)
	defer s.Close()
	attach(t, s, j)
	wantRefusal(t, s.Recover(1), j.name(rel), "recover")
}
