package bench

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// A micro-batch engine takes 1,000 records at each 1 s trigger (buckets
// 10, 20, 30) from a 1,000 records/s input. Over the window [1 s, 3.58 s)
// it took three bursts in 2.5 s of whole buckets, which reads as 1,200/s;
// over the whole cycles between its first and last recovery point it is
// the 1,000/s it keeps up with.
func TestSteadyThroughputCountsWholeCycles(t *testing.T) {
	s := &report.Series{BucketMs: 100}
	for i := range 40 {
		b := report.Bucket{TMs: float64(i * 100)}
		if i%10 == 0 && i > 0 {
			b.Processed = 1000
		}
		s.Buckets = append(s.Buckets, b)
	}
	for _, at := range []float64{1030, 2030, 3030} {
		s.Events = append(s.Events, report.SeriesEvent{TMs: at, Kind: "batch", Status: report.PointCompleted})
	}
	s.Events = append(s.Events, report.SeriesEvent{TMs: 2500, Kind: "batch", Status: report.PointFailed})
	f, points := steady(s, window{fromMs: 1000, toMs: 3580})
	if points != 3 || f.ThroughputRPS == nil || *f.ThroughputRPS != 1000 {
		t.Fatalf("throughput %v over %d points, want 1000 records/s over 3", f.ThroughputRPS, points)
	}
	// With one point there is no whole cycle: the window as it is.
	f, _ = steady(s, window{fromMs: 1000, toMs: 1900})
	if f.ThroughputRPS == nil || *f.ThroughputRPS != 1000/0.9 {
		t.Fatalf("one-point window throughput %v, want %v", f.ThroughputRPS, 1000/0.9)
	}
}
