package report

import (
	"math"
	"sort"
)

// CatchUpWindowMs is how far before a fault the lag it must return to is
// measured; CatchUpTolerance is how far above that level counts as back.
const (
	CatchUpWindowMs  = 1000
	CatchUpTolerance = 1.1
)

// CaughtUpAt is the end of the first bucket ending at or after fromMs
// whose lag is back within CatchUpTolerance of the mean lag over the
// CatchUpWindowMs before faultMs, plus one bucket's worth of offered
// records; nil when no bucket gets there. The floor is there because a run
// that keeps up has a lag near zero at bucket ends, and which of one
// bucket's arrivals are still unread at a bucket's end depends on where
// the reader's batches fall, not on recovery: 10 % of almost nothing
// would call a run that has recovered still behind.
func CaughtUpAt(s *Series, faultMs, fromMs float64) *float64 {
	var lag, offered float64
	n := 0
	for _, b := range s.Buckets {
		end := b.TMs + s.BucketMs
		if end > faultMs-CatchUpWindowMs && end <= faultMs {
			lag += float64(b.Lag)
			offered += float64(b.Offered)
			n++
		}
	}
	if n == 0 && len(s.Buckets) > 0 {
		// A fault in the first bucket: nothing before it was behind.
		offered, n = float64(s.Buckets[0].Offered), 1
	}
	if n == 0 {
		return nil
	}
	limit := CatchUpTolerance*lag/float64(n) + offered/float64(n)
	for _, b := range s.Buckets {
		end := b.TMs + s.BucketMs
		if end >= fromMs && end > faultMs && float64(b.Lag) <= limit {
			return &end
		}
	}
	return nil
}

// RereadBetween sums the records read again in the buckets from the one
// holding fromMs up to the one holding toMs (excluded).
func RereadBetween(s *Series, fromMs, toMs float64) int64 {
	var n int64
	lo := math.Floor(fromMs/s.BucketMs) * s.BucketMs
	hi := math.Floor(toMs/s.BucketMs) * s.BucketMs
	for _, b := range s.Buckets {
		if b.TMs >= lo && b.TMs < hi {
			n += b.Reread
		}
	}
	return n
}

// firstEvent is the moment of the first event of kind in [fromMs, toMs).
func firstEvent(s *Series, kind string, fromMs, toMs float64) *float64 {
	for _, e := range s.Events {
		if e.Kind == kind && e.TMs >= fromMs && e.TMs < toMs {
			t := e.TMs
			return &t
		}
	}
	return nil
}

// BillSeries fills the series-derived part of each recovery's bill from
// s, using its at_ms, detect_ms, acquire_ms and restore_ms (at + detect +
// acquire + restore is when processing restarts): the records re-read
// from its fault to the next one (or the end), the time from restarting
// until the read position was back where the crash found it, the catch-up
// and the time to recovered. It adds the crashes to s.Events and their
// phases to s.Phases. A recovery without at_ms, the earlier process's
// death (--resume) and a crash no recovery ran for keep what the executor
// said.
func BillSeries(s *Series, recs []Recovery) {
	faults := make([]float64, 0, len(recs))
	for _, r := range recs {
		if r.AtMs != nil {
			faults = append(faults, *r.AtMs)
		}
	}
	endMs := math.Inf(1)
	if n := len(s.Buckets); n > 0 {
		endMs = s.Buckets[n-1].TMs + s.BucketMs
	}
	for i := range recs {
		r := &recs[i]
		if r.AtMs == nil || r.Cause == CauseProcessDied {
			continue
		}
		at := *r.AtMs
		next := endMs
		for _, f := range faults {
			if f > at && f < next {
				next = f
			}
		}
		s.Events = append(s.Events, SeriesEvent{TMs: at, Kind: "crash"})
		ph := Phase{FaultMs: at}
		detected := at + orZero(r.DetectMs)
		acquired := detected + orZero(r.AcquireMs)
		ph.DetectedMs, ph.AcquiredMs = ptr(detected), ptr(acquired)
		recovered := r.RestoreMs != nil || r.CatchUpMs != nil // else the run ended first
		if !recovered {
			r.ReprocessedRecords, r.ReprocessMs, r.CatchUpMs, r.RecoveredMs = nil, nil, nil, nil
			s.Phases = append(s.Phases, ph)
			continue
		}
		restored := acquired + orZero(r.RestoreMs)
		ph.RestoredMs = ptr(restored)
		n := RereadBetween(s, at, next)
		r.ReprocessedRecords = &n
		// Re-reading starts at the rewind the restore made, if it made one;
		// a restore that moved nothing back re-reads nothing.
		from := restored
		r.ReprocessMs = ptr(0)
		if rw := firstEvent(s, EventRewind, at, next); rw != nil {
			from = max(from, *rw)
			r.ReprocessMs = nil
			if done := firstEvent(s, EventRereadDone, *rw, next); done != nil {
				r.ReprocessMs = ptr(max(0, *done-restored))
			}
		}
		r.CatchUpMs, r.RecoveredMs = nil, nil
		if cu := CaughtUpAt(s, at, from); cu != nil && *cu <= next {
			ph.CaughtUpMs = cu
			r.CatchUpMs, r.RecoveredMs = ptr(max(0, *cu-restored)), ptr(*cu-at)
		}
		s.Phases = append(s.Phases, ph)
	}
	sort.SliceStable(s.Events, func(i, j int) bool { return s.Events[i].TMs < s.Events[j].TMs })
}

func orZero(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func ptr(v float64) *float64 { return &v }
