package report

import (
	"math"
	"testing"
	"time"
)

// A window's percentiles come from the buckets' histograms merged: bucket
// i holds 100 rows of (i+1) ms, so [200, 700) holds 3..7 ms alike, whose
// p99 is 7 ms (an average of the buckets' p99s would say 5 ms). The
// bucket the window's end cuts is left out.
func TestLatencyBetweenMergesTheBucketsHistograms(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := NewSeriesRecorder(t0, true)
	for i := range 10 {
		lat := time.Duration(i+1) * time.Millisecond
		r.Visible(t0.Add(time.Duration(i)*100*time.Millisecond+50*time.Millisecond), 1, func(int) (time.Duration, int64) { return lat, 100 })
	}
	s := r.Series(t0.Add(time.Second))
	near := func(got, want float64) bool { return math.Abs(got-want) <= 0.02*want }
	l := s.LatencyBetween(200, 700)
	if l == nil || !near(l.P50, 5) || !near(l.P99, 7) || !near(l.Max, 7) {
		t.Fatalf("latency in [200,700): %+v, want p50 5, p99 7, max 7 ms", l)
	}
	if l := s.LatencyBetween(200, 750); l == nil || !near(l.Max, 7) {
		t.Fatalf("latency in [200,750): %+v, want the bucket the end cuts left out (max 7 ms)", l)
	}
	if l := s.LatencyBetween(1000, 2000); l != nil {
		t.Fatalf("an empty window: %+v, want nil", l)
	}
	s.Events = []SeriesEvent{{TMs: 150, Kind: "batch", Status: PointCompleted}, {TMs: 300, Kind: "batch", Status: PointFailed},
		{TMs: 400, Kind: "crash"}, {TMs: 500, Kind: "batch", Status: PointCompleted, DurationMs: ptr(12)}}
	if p := s.PointsBetween(100, 500); len(p) != 1 || p[0] != nil {
		t.Fatalf("points in [100,500): %v, want the one completed at 150 (no duration)", p)
	}
	if p := s.PointsBetween(200, 600); len(p) != 1 || p[0] == nil || *p[0] != 12 {
		t.Fatalf("points in [200,600): %v, want the one of 12 ms", p)
	}
}
