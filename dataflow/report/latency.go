package report

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency are end-to-end latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Rate is n per second over d, or 0 when d is not positive (a zero wall
// time would otherwise give an infinity that JSON cannot encode).
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// LatencyRecorder collects end-to-end latencies in an HDR histogram
// (microsecond resolution, up to one hour).
type LatencyRecorder struct{ h *hdrhistogram.Histogram }

// NewLatencyRecorder returns an empty recorder.
func NewLatencyRecorder() *LatencyRecorder {
	return &LatencyRecorder{h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// Record adds n records that each took d from hand-over to visibility.
func (r *LatencyRecorder) Record(d time.Duration, n int64) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	if us > r.h.HighestTrackableValue() {
		us = r.h.HighestTrackableValue() // an hour or more is reported as an hour
	}
	_ = r.h.RecordValues(us, n) // cannot fail: us is within the histogram's range
}

// Latency returns the percentiles, or nil when nothing was recorded.
func (r *LatencyRecorder) Latency() *Latency {
	if r.h.TotalCount() == 0 {
		return nil
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return &Latency{P50: ms(r.h.ValueAtQuantile(50)), P99: ms(r.h.ValueAtQuantile(99)), Max: ms(r.h.Max())}
}
