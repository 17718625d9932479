package report

import "testing"

// An executor reporting its own positions: what its batches take counts as
// processed (re-read below the high-water mark), and the lag counts from
// where finished batches left the partition, not from what was read ahead.
func TestRecorderOwnPositionsLagFollowsFinishedBatches(t *testing.T) {
	r, c := testRecorder(false)
	in := r.InputOwn(1, nil)
	c.at(5)
	if rd := r.Open(in.First(), 0); rd != nil {
		t.Fatal("a reader of an own-position input is recorded")
	}
	c.at(10)
	in.Took(0, 0, 100)
	c.at(40)
	in.Done(0, 100)
	in.Took(0, 100, 200) // the batch in flight when the crash comes
	c.at(150)
	r.Open(in.First(), 100) // a restore re-opens the reader: no position change
	in.Took(0, 100, 200)    // the re-run: all re-read
	c.at(180)
	in.Done(0, 200)
	c.at(250)
	in.Took(0, 200, 300)
	s := r.Series(c.at(299))
	if len(s.Buckets) != 3 {
		t.Fatalf("%d buckets, want 3", len(s.Buckets))
	}
	// Offered (unpaced: taken for the first time) 200, 0, 100; positions
	// at the ends 100, 200, 200.
	want := []struct{ processed, reread, offered, lag int64 }{{200, 0, 200, 100}, {100, 100, 0, 0}, {100, 0, 100, 100}}
	for i, w := range want {
		b := s.Buckets[i]
		if b.Processed != w.processed || b.Reread != w.reread || b.Offered != w.offered || b.Lag != w.lag {
			t.Fatalf("bucket %d: processed %d reread %d offered %d lag %d, want %+v", i, b.Processed, b.Reread, b.Offered, b.Lag, w)
		}
	}
	// Replaying starts at the re-run's take and ends when it finished.
	if len(s.Events) != 2 || s.Events[0].Kind != EventRewind || s.Events[0].TMs != 150 || s.Events[1].Kind != EventRereadDone || s.Events[1].TMs != 180 {
		t.Fatalf("events %+v, want a rewind at 150 and re-reading done at 180", s.Events)
	}
}

// The first position of an own-position partition is where it was first
// opened (a --resume continues an earlier process): neither offered nor
// behind here.
func TestRecorderOwnPositionsStartWhereOpened(t *testing.T) {
	r, c := testRecorder(false)
	in := r.InputOwn(2, nil)
	r.Open(in.First(), 500)
	r.Open(in.First()+1, 700)
	c.at(20)
	in.Took(0, 500, 550)
	in.Took(1, 700, 710)
	c.at(30)
	in.Done(1, 710)
	s := r.Series(c.at(99))
	b := s.Buckets[0]
	if b.Offered != 60 || b.Processed != 60 || b.Reread != 0 || b.Lag != 50 || len(s.Events) != 0 {
		t.Fatalf("bucket %+v, events %+v: want 60 offered and processed, none re-read, lag 50, no events", b, s.Events)
	}
}

func TestRecorderOwnPositionsNilIsSafe(t *testing.T) {
	var r *SeriesRecorder
	in := r.InputOwn(1, nil)
	in.Took(0, 0, 10)
	in.Done(0, 10)
	var zero SeriesInput
	zero.Took(0, 0, 10)
	zero.Done(0, 10)
}
