package report

import (
	"math"
	"testing"
	"time"
)

// clock is a test's hand-moved time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }
func (c *clock) at(ms int64) time.Time {
	c.t = t0.Add(time.Duration(ms) * time.Millisecond)
	return c.t
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testRecorder(keepLatency bool) (*SeriesRecorder, *clock) {
	c := &clock{t: t0}
	r := NewSeriesRecorder(t0, keepLatency)
	r.now = c.now
	return r, c
}

// series builds a timeline of buckets with the given lags, offering
// offered records per bucket.
func series(offered int64, lags ...int64) *Series {
	s := &Series{BucketMs: SeriesBucketMs}
	for i, l := range lags {
		s.Buckets = append(s.Buckets, Bucket{TMs: float64(i * SeriesBucketMs), Offered: offered, Lag: l})
	}
	return s
}

func TestCaughtUpAtKnownAnswer(t *testing.T) {
	// Ten buckets of lag 100 before the fault at 1000 ms: the limit is
	// 1.1·100 + 50 (one bucket's arrivals) = 160. The lag climbs during
	// the outage and drains; 170 is still behind, 150 is back.
	s := series(50, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 400, 900, 600, 170, 150, 100)
	got := CaughtUpAt(s, 1000, 1200)
	if got == nil || *got != 1500 {
		t.Fatalf("caught up at %v, want 1500 (end of the bucket with lag 150)", got)
	}
	// Searching from later finds the first bucket after that.
	if got := CaughtUpAt(s, 1000, 1550); got == nil || *got != 1600 {
		t.Fatalf("caught up from 1550 at %v, want 1600", got)
	}
}

func TestCaughtUpAtNeverIsNil(t *testing.T) {
	s := series(50, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 400, 900, 1200, 1500)
	if got := CaughtUpAt(s, 1000, 1000); got != nil {
		t.Fatalf("caught up at %v, but the lag never came back below 160", *got)
	}
}

func TestBillSeriesPhasesAndParts(t *testing.T) {
	// Fault at 1000, detect 200, acquire 300, restore 100: restored at
	// 1600. Re-reading ran from the rewind at 1610 to 1800; the lag is back
	// at the end of bucket [1900,2000).
	lags := []int64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 50, 100, 150, 200, 250, 300, 400, 300, 200, 10, 0}
	s := series(50, lags...)
	s.Buckets[16].Reread, s.Buckets[17].Reread = 700, 300
	s.Buckets[2].Reread = 99 // before the fault: not this crash's
	s.Events = []SeriesEvent{{TMs: 1610, Kind: EventRewind}, {TMs: 1800, Kind: EventRereadDone}, {TMs: 500, Kind: "batch", ID: 3, Status: PointCompleted}}
	f := func(v float64) *float64 { return &v }
	recs := []Recovery{{Cause: "worker 0 killed", AtMs: f(1000), DetectMs: f(200), AcquireMs: f(300), RestoreMs: f(100)}}
	BillSeries(s, recs)
	r := recs[0]
	if r.ReprocessedRecords == nil || *r.ReprocessedRecords != 1000 {
		t.Fatalf("reprocessed %v, want 1000", r.ReprocessedRecords)
	}
	if r.ReprocessMs == nil || *r.ReprocessMs != 200 {
		t.Fatalf("reprocess_ms %v, want 200 (restored 1600 to re-read done 1800)", r.ReprocessMs)
	}
	// Limit: 1.1·0 + 50; lag 10 at the end of bucket 19 (2000 ms).
	if r.CatchUpMs == nil || *r.CatchUpMs != 400 || r.RecoveredMs == nil || *r.RecoveredMs != 1000 {
		t.Fatalf("catch_up %v recovered %v, want 400 and 1000", r.CatchUpMs, r.RecoveredMs)
	}
	if len(s.Phases) != 1 {
		t.Fatalf("%d phases, want 1", len(s.Phases))
	}
	p := s.Phases[0]
	if p.FaultMs != 1000 || *p.DetectedMs != 1200 || *p.AcquiredMs != 1500 || *p.RestoredMs != 1600 || *p.CaughtUpMs != 2000 {
		t.Fatalf("phases %v %v %v %v %v, want 1000 1200 1500 1600 2000", p.FaultMs, *p.DetectedMs, *p.AcquiredMs, *p.RestoredMs, *p.CaughtUpMs)
	}
	if s.Events[0].Kind != "batch" || s.Events[1].Kind != "crash" || s.Events[1].TMs != 1000 {
		t.Fatalf("events %+v, want the crash added in time order", s.Events)
	}
}

func TestBillSeriesLeavesUnrecoveredAndEarlierAlone(t *testing.T) {
	s := series(50, 0, 0, 0, 0)
	f := func(v float64) *float64 { return &v }
	recs := []Recovery{
		{Cause: CauseProcessDied, AtMs: f(0), RestoreMs: f(3)},
		{Cause: "worker 0 killed; no recovery ran", AtMs: f(200)},
	}
	BillSeries(s, recs)
	for i, r := range recs {
		if r.ReprocessedRecords != nil || r.CatchUpMs != nil || r.ReprocessMs != nil || r.RecoveredMs != nil {
			t.Fatalf("recovery %d got series figures %+v; want nulls", i, r)
		}
	}
	if len(s.Phases) != 1 || s.Phases[0].RestoredMs != nil {
		t.Fatalf("phases %+v, want one with no restore", s.Phases)
	}
}

func TestRecorderRereadAcrossARewind(t *testing.T) {
	r, c := testRecorder(false)
	part := r.Input(1, nil)
	c.at(10)
	rd := r.Open(part, 0)
	rd.Read(100, 100)
	c.at(50)
	rd.Read(100, 200)
	c.at(150)
	rd.Close()
	rd = r.Open(part, 50) // a restore to 50: 150 records behind
	rd.Read(100, 150)     // all re-read
	c.at(250)
	rd.Read(100, 250) // 50 re-read, 50 new
	s := r.Series(c.at(299))
	if len(s.Buckets) != 3 {
		t.Fatalf("%d buckets, want 3", len(s.Buckets))
	}
	want := []struct{ processed, reread, offered, lag int64 }{{200, 0, 200, 0}, {100, 100, 0, 50}, {100, 50, 50, 0}}
	for i, w := range want {
		b := s.Buckets[i]
		if b.Processed != w.processed || b.Reread != w.reread || b.Offered != w.offered || b.Lag != w.lag {
			t.Fatalf("bucket %d: processed %d reread %d offered %d lag %d, want %+v", i, b.Processed, b.Reread, b.Offered, b.Lag, w)
		}
	}
	if len(s.Events) != 2 || s.Events[0].Kind != EventRewind || s.Events[0].TMs != 150 || s.Events[1].Kind != EventRereadDone || s.Events[1].TMs != 250 {
		t.Fatalf("events %+v, want a rewind at 150 and re-reading done at 250", s.Events)
	}
}

func TestRecorderLagAgainstAPacedCurve(t *testing.T) {
	r, c := testRecorder(false)
	// 1000 records/s over two partitions: one record per ms in all.
	due := func(at time.Time) int64 { return max(0, int64(at.Sub(t0)/time.Millisecond)) }
	first := r.Input(2, due)
	p0, p1 := r.Open(first, 0), r.Open(first+1, 0)
	c.at(50)
	p0.Read(30, 30)
	p1.Read(20, 20)
	c.at(150)
	p0.Read(60, 90) // p1 stalls
	s := r.Series(c.at(250))
	// Ends 100, 200 and the run's end at 250: offered 100, 200, 250 so
	// far; read 50, 110, 110.
	want := []struct{ offered, lag int64 }{{100, 50}, {100, 90}, {50, 140}}
	for i, w := range want {
		if b := s.Buckets[i]; b.Offered != w.offered || b.Lag != w.lag {
			t.Fatalf("bucket %d: offered %d lag %d, want %+v", i, b.Offered, b.Lag, w)
		}
	}
}

func TestRecorderBucketedPercentiles(t *testing.T) {
	r, _ := testRecorder(true)
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	// Bucket 0: 99 rows at 10 ms, 1 at 500 ms. Bucket 3: 100 at 40 ms.
	lat := []time.Duration{ms(10), ms(500)}
	rows := []int64{99, 1}
	r.Visible(t0.Add(ms(20)), 2, func(i int) (time.Duration, int64) { return lat[i], rows[i] })
	r.Visible(t0.Add(ms(310)), 1, func(int) (time.Duration, int64) { return ms(40), 100 })
	r.Visible(t0.Add(ms(320)), 1, func(int) (time.Duration, int64) { return -1, 7 }) // latency unknown
	s := r.Series(t0.Add(ms(399)))
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.01 }
	b0, b3 := s.Buckets[0], s.Buckets[3]
	if b0.Visible != 100 || b0.Latency == nil || !near(b0.Latency.P50, 10) || !near(b0.Latency.P99, 10) || !near(b0.Latency.Max, 500) {
		t.Fatalf("bucket 0: visible %d latency %+v, want 100 rows, p50 10 p99 10 max 500", b0.Visible, b0.Latency)
	}
	if b3.Visible != 107 || b3.Latency == nil || !near(b3.Latency.P50, 40) || !near(b3.Latency.Max, 40) {
		t.Fatalf("bucket 3: visible %d latency %+v, want 107 rows, all at 40 ms", b3.Visible, b3.Latency)
	}
	if s.Buckets[1].Latency != nil || s.Buckets[1].Visible != 0 {
		t.Fatalf("bucket 1 saw nothing, got %+v", s.Buckets[1])
	}
}

func TestRecorderNilIsSafe(t *testing.T) {
	var r *SeriesRecorder
	rd := r.Open(r.Input(1, nil), 0)
	rd.Read(10, 10)
	rd.Close()
	r.Visible(time.Now(), 1, func(int) (time.Duration, int64) { return 0, 1 })
	r.Point("batch", 1, PointCompleted)
	if r.Series(time.Now()) != nil {
		t.Fatal("a nil recorder returned a series")
	}
}
