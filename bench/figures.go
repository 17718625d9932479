package bench

import (
	"math"
	"slices"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// window is the part of a run the steady-state figures come from: from
// the end of the warmup to the fault (to the end of the run without one).
type window struct{ fromMs, toMs float64 }

// windowOf is the steady-state window of a run with series s: warmupMs on,
// up to faultMs (nil: no fault), or to the end of the live input
// (inputMs; 0: not known) or of the series, whichever comes first: what a
// contestant does after the input has ended is not its steady state.
func windowOf(s *report.Series, warmupMs, inputMs float64, faultMs *float64) window {
	w := window{fromMs: warmupMs}
	if n := len(s.Buckets); n > 0 {
		w.toMs = s.Buckets[n-1].TMs + s.BucketMs
	}
	if inputMs > 0 {
		w.toMs = min(w.toMs, inputMs)
	}
	if faultMs != nil {
		w.toMs = min(w.toMs, *faultMs)
	}
	return w
}

// steady are the figures of a window: throughput of first reads, the
// latency of what became visible (histograms merged), the median duration
// of the recovery points completed in it and how many completed.
func steady(s *report.Series, w window) (f Figures, points int) {
	// Throughput over whole recovery-point cycles where there are two
	// points: a micro-batch engine takes its input in bursts at each
	// trigger, and a window that is not a whole number of cycles would
	// count one burst too many or too few (180k records/s of a 150k
	// input).
	from, to := w.fromMs, w.toMs
	if a, b, ok := cycleSpan(s, w); ok {
		from, to = a, b
	}
	var read int64
	var covered float64
	for _, b := range s.Buckets {
		if s.InWindow(b, from, to) {
			read += b.Processed - b.Reread
			covered += s.BucketMs
		}
	}
	if covered > 0 {
		f.ThroughputRPS = ptr(float64(read) / (covered / 1000))
	}
	if l := s.LatencyBetween(w.fromMs, w.toMs); l != nil {
		f.LatencyP50Ms, f.LatencyP99Ms, f.LatencyMaxMs = ptr(l.P50), ptr(l.P99), ptr(l.Max)
	}
	pts := s.PointsBetween(w.fromMs, w.toMs)
	var durs []float64
	for _, d := range pts {
		if d != nil {
			durs = append(durs, *d)
		}
	}
	if len(durs) > 0 {
		f.CheckpointMs = ptr(StatOf(durs).Median)
	}
	return f, len(pts)
}

// bill adds the recovery bill of the run's recoveries to f, summed over
// them when there are several; a part no recovery measured stays nil.
func bill(f *Figures, s *report.Summary) {
	for _, r := range s.Recoveries {
		f.DetectMs = add(f.DetectMs, r.DetectMs)
		f.AcquireMs = add(f.AcquireMs, r.AcquireMs)
		f.RestoreMs = add(f.RestoreMs, r.RestoreMs)
		f.RestoreBytes = add(f.RestoreBytes, r.RestoreBytes)
		f.ReprocessedRecords = add(f.ReprocessedRecords, r.ReprocessedRecords)
		f.ReprocessMs = add(f.ReprocessMs, r.ReprocessMs)
		f.CatchUpMs = add(f.CatchUpMs, r.CatchUpMs)
		f.RecoveredMs = add(f.RecoveredMs, r.RecoveredMs)
		for _, m := range r.Modelled {
			if !slices.Contains(f.Modelled, m) {
				f.Modelled = append(f.Modelled, m)
			}
		}
	}
	f.DuplicateRows, f.ConflictingRows, f.LostRecords = s.SinkDuplicateRows, s.SinkConflictingRows, s.LostRecords
	f.WallMs = s.WallMs
}

// measuredParts are the bill's parts (detect, acquire) that s's
// recoveries measured rather than modelled: every recovery has the part
// and none names it modelled.
func measuredParts(s *report.Summary) []string {
	out := []string{}
	for _, part := range []string{report.ModelledDetect, report.ModelledAcquire} {
		measured := len(s.Recoveries) > 0
		for _, r := range s.Recoveries {
			v := r.DetectMs
			if part == report.ModelledAcquire {
				v = r.AcquireMs
			}
			if v == nil || slices.Contains(r.Modelled, part) {
				measured = false
			}
		}
		if measured {
			out = append(out, part)
		}
	}
	return out
}

// cycleSpan is the span of whole buckets from the bucket of the first
// completed recovery point in w to the bucket of the last one; ok is
// false with fewer than two.
func cycleSpan(s *report.Series, w window) (from, to float64, ok bool) {
	first, last, n := 0.0, 0.0, 0
	for _, e := range s.Events {
		if e.Status != report.PointCompleted || e.TMs < w.fromMs || e.TMs >= w.toMs {
			continue
		}
		if n == 0 || e.TMs < first {
			first = e.TMs
		}
		last = max(last, e.TMs)
		n++
	}
	if n < 2 || s.BucketMs <= 0 {
		return 0, 0, false
	}
	from = math.Floor(first/s.BucketMs) * s.BucketMs
	to = math.Floor(last/s.BucketMs) * s.BucketMs
	return from, to, to > from
}

func ptr[T any](v T) *T { return &v }

// add is sum + v, where a nil v adds nothing and a nil sum is none yet.
func add[T int64 | float64](sum, v *T) *T {
	switch {
	case v == nil:
		return sum
	case sum == nil:
		return ptr(*v)
	}
	return ptr(*sum + *v)
}
