package report

import (
	"testing"
	"time"
)

// A run longer than seriesMaxBuckets buckets folds its series: the bucket
// count stays bounded, the width doubles, and the totals over the series
// (records read, re-read, made visible, offered) are what was recorded.
func TestSeriesFoldKeepsTotals(t *testing.T) {
	for _, keepLatency := range []bool{false, true} {
		r, c := testRecorder(keepLatency)
		const maxBuckets = 64 // seriesMaxBuckets folds the same way, slower
		r.maxBuckets = maxBuckets
		r.Input(1, nil)
		rd := r.Open(0, 0)
		const steps = 5*maxBuckets + 7 // a read every 50 ms
		var pos, visible int64
		for k := range int64(steps) {
			c.at(50 * k)
			pos += 10
			rd.Read(10, pos)
			if k%3 == 0 {
				visible += 4
				r.Visible(c.t, 1, func(int) (time.Duration, int64) { return 20 * time.Millisecond, 4 })
			}
			r.Point("batch", k, PointCompleted)
		}
		// A rewind late in the run, and its re-reading: kept whatever the
		// thinning.
		rd.Close()
		rd2 := r.Open(0, pos-100)
		c.at(50 * steps)
		rd2.Read(100, pos)
		end := c.at(50*steps + 10)
		s := r.Series(end)

		if n := len(s.Buckets); n > maxBuckets {
			t.Fatalf("latency %v: %d buckets, want at most %d", keepLatency, n, maxBuckets)
		}
		wantWidth := float64(SeriesBucketMs)
		for float64(steps*50)/wantWidth >= maxBuckets {
			wantWidth *= 2
		}
		if s.BucketMs != wantWidth {
			t.Fatalf("latency %v: bucket width %v ms, want %v", keepLatency, s.BucketMs, wantWidth)
		}
		var processed, reread, vis, offered int64
		for i, b := range s.Buckets {
			if b.TMs != float64(i)*s.BucketMs {
				t.Fatalf("bucket %d starts at %v ms, want %v", i, b.TMs, float64(i)*s.BucketMs)
			}
			processed += b.Processed
			reread += b.Reread
			vis += b.Visible
			offered += b.Offered
		}
		if processed != pos+100 || reread != 100 || vis != visible || offered != pos {
			t.Fatalf("latency %v: processed %d reread %d visible %d offered %d; want %d, 100, %d, %d",
				keepLatency, processed, reread, vis, offered, pos+100, visible, pos)
		}
		if l := s.LatencyBetween(0, s.Buckets[len(s.Buckets)-1].TMs); keepLatency && (l == nil || l.P50 < 19 || l.P50 > 21) {
			t.Fatalf("latency over the folded series %+v, want p50 about 20 ms", l)
		}
		points, rewinds := 0, 0
		for _, e := range s.Events {
			switch e.Kind {
			case "batch":
				points++
			case EventRewind:
				rewinds++
			}
		}
		if points > 2*maxBuckets || points < len(s.Buckets)/2 {
			t.Fatalf("latency %v: %d recovery points kept for %d buckets, want between half the buckets and %d",
				keepLatency, points, len(s.Buckets), 2*maxBuckets)
		}
		if rewinds != 1 {
			t.Fatalf("latency %v: %d rewind events, want 1", keepLatency, rewinds)
		}
	}
}
