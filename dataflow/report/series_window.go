package report

import "github.com/HdrHistogram/hdrhistogram-go"

// InWindow reports whether bucket b lies wholly within [fromMs, toMs): a
// bucket cut by a window edge (the fault's) would mix both sides.
func (s *Series) InWindow(b Bucket, fromMs, toMs float64) bool {
	return b.TMs >= fromMs && b.TMs+s.BucketMs <= toMs
}

// LatencyBetween is the latency of the rows made visible in the buckets
// lying wholly within [fromMs, toMs), read from their histograms merged:
// percentiles of a window cannot be had by averaging the buckets'. Nil
// when none of those buckets has a histogram.
func (s *Series) LatencyBetween(fromMs, toMs float64) *Latency {
	var sum *hdrhistogram.Histogram
	for _, b := range s.Buckets {
		if b.Hist == nil || !s.InWindow(b, fromMs, toMs) {
			continue
		}
		if sum == nil {
			sum = hdrhistogram.New(b.Hist.LowestTrackableValue(), b.Hist.HighestTrackableValue(), int(b.Hist.SignificantFigures()))
		}
		sum.Merge(b.Hist)
	}
	if sum == nil {
		return nil
	}
	return histLatency(sum)
}

// PointsBetween are the durations (ms; nil for a point that did not say)
// of the recovery points completed within [fromMs, toMs).
func (s *Series) PointsBetween(fromMs, toMs float64) []*float64 {
	var out []*float64
	for _, e := range s.Events {
		if e.Status == PointCompleted && e.TMs >= fromMs && e.TMs < toMs {
			out = append(out, e.DurationMs)
		}
	}
	return out
}
