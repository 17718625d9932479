package report

import (
	"strings"
	"testing"
	"time"
)

// The bill counts crashes, not lost files; a crash no recovery ran for says
// so in its cause, and the earlier process's death keeps only a restore.
func TestBillRecoveries(t *testing.T) {
	var b Bill
	start := time.Now()
	died := b.ProcessDied(start)
	rs := 3 * time.Millisecond
	died.Restore = &rs
	c := b.Open("worker 1 killed", start.Add(time.Second))
	d, rp, cu := time.Millisecond, int64(40), 10*time.Millisecond
	c.Detect, c.Restore, c.Reprocessed, c.CatchUp = &d, &rs, &rp, &cu
	idle := b.Open("worker 2 killed while idle", start)
	zero := time.Duration(0)
	idle.CatchUp = &zero
	b.OpenLoss("file lost", start)
	b.Open("coordinator killed", start)
	if b.Crashes() != 4 {
		t.Fatalf("%d crashes, want 4 (the lost file is not one)", b.Crashes())
	}
	r := b.Recoveries()
	if len(r) != 5 {
		t.Fatalf("%d recoveries, want 5", len(r))
	}
	if r[0].Cause != CauseProcessDied || r[0].DetectMs != nil || r[0].ReprocessedRecords != nil || *r[0].RestoreMs != 3 {
		t.Fatalf("earlier process's bill %+v", r[0])
	}
	if *r[1].DetectMs != 1 || *r[1].ReprocessedRecords != 40 || *r[1].CatchUpMs != 10 || r[1].Cause != "worker 1 killed" {
		t.Fatalf("crash bill %+v", r[1])
	}
	if r[2].Cause != "worker 2 killed while idle" || r[3].Cause != "file lost" {
		t.Fatalf("causes %q, %q: a crash that caught up, or a lost file, is not unrecovered", r[2].Cause, r[3].Cause)
	}
	if !strings.HasSuffix(r[4].Cause, "no recovery ran: the run ended first") {
		t.Fatalf("unrecovered crash's cause %q", r[4].Cause)
	}
	var none Bill
	if none.Recoveries() != nil {
		t.Fatal("an empty bill has recoveries")
	}
}

// The tally sums losses and later figures; the rebuild time is null until
// a piece was rebuilt.
func TestPieceTally(t *testing.T) {
	var pt PieceTally
	pt.Loss(PieceLoss{PiecesLost: 2})
	if s := pt.Summary("lineage"); s.Recoveries != 1 || s.PiecesLost != 2 || s.RebuildMs != nil {
		t.Fatalf("before the rebuild: %+v", s)
	}
	pt.More(PieceLoss{PiecesRebuilt: 2, RecordsReread: 100, Wall: 5 * time.Millisecond})
	s := pt.Summary("lineage")
	if s.Recovery != "lineage" || s.PiecesRebuilt != 2 || s.RecordsReread != 100 || s.RebuildMs == nil || *s.RebuildMs != 5 {
		t.Fatalf("after the rebuild: %+v", s)
	}
}
