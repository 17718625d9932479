package report

import "github.com/HdrHistogram/hdrhistogram-go"

// Series is a run over time, in fixed buckets: what the live input offered,
// what the run read and made visible, how far it fell behind, the
// end-to-end latency of what became visible in each bucket, the recovery
// points as they completed, and each crash's phases. rewind bench writes it
// as timeline.csv and draws it; rewind run uses it to bill catch-up.
//
// Times are milliseconds since the run started (the same clock as progress
// events' t_ms).
type Series struct {
	BucketMs float64       `json:"bucket_ms"`
	Buckets  []Bucket      `json:"buckets"`
	Events   []SeriesEvent `json:"events"`
	Phases   []Phase       `json:"phases"`
}

// SeriesBucketMs is the bucket width rewind bench records at.
const SeriesBucketMs = 100

// Bucket is one interval [TMs, TMs+BucketMs).
type Bucket struct {
	TMs float64 `json:"t_ms"`
	// Offered counts input records that became available (were due by the
	// generator's pace) within the bucket; for an unpaced input, those
	// read for the first time.
	Offered int64 `json:"offered"`
	// Processed counts records read within the bucket, replays included.
	Processed int64 `json:"processed"`
	// Reread counts the records among them read before (below the
	// partition's high-water mark): replays after a restore.
	Reread int64 `json:"reread"`
	// Lag is, at the bucket's end, the records offered so far minus the
	// read position (summed over partitions; a restore moves the position
	// back, so the lag jumps up at a crash and drains during catch-up).
	Lag int64 `json:"lag"`
	// Visible counts output rows made visible within the bucket.
	Visible int64 `json:"visible"`
	// Latency of the rows made visible within the bucket, in ms; nil when
	// none became visible.
	Latency *Latency `json:"latency_ms"`
	// Hist is the histogram Latency was read from (µs), kept so a window
	// of buckets gets its percentiles by merging (LatencyBetween) rather
	// than by averaging percentiles; nil when none became visible or the
	// series was recorded without latency.
	Hist *hdrhistogram.Histogram `json:"-"`
}

// SeriesEvent is a recovery point (checkpoint, batch, finite job) or a
// crash, at the moment it happened.
type SeriesEvent struct {
	TMs  float64 `json:"t_ms"`
	Kind string  `json:"kind"`
	ID   int64   `json:"id"`
	// Status is "completed", "failed" or "aborted" for recovery points.
	Status string `json:"status,omitempty"`
	// DurationMs is how long the recovery point took, as its executor
	// measures it; nil when not told.
	DurationMs *float64 `json:"duration_ms,omitempty"`
}

// Phase is one crash's boundaries: the fault, when it was detected (after
// the modelled heartbeat timeout), when a replacement was acquired, when
// the restore finished (processing restarts), and when the lag was back
// within 10 % of its level before the fault. A boundary not reached before
// the run ended is nil.
type Phase struct {
	FaultMs    float64  `json:"fault_ms"`
	DetectedMs *float64 `json:"detected_ms"`
	AcquiredMs *float64 `json:"acquired_ms"`
	RestoredMs *float64 `json:"restored_ms"`
	CaughtUpMs *float64 `json:"caught_up_ms"`
}
