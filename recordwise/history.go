package recordwise

import (
	"slices"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// historyKeep is how many of the newest checkpoints Report.History holds:
// an endless run at the default 1 s interval finishes 3 600 an hour, each
// with a row per task, so the history keeps the newest and the summary's
// totals (cpTotals) count every one. Checkpoints go on being written as
// progress events in full.
const historyKeep = 256

// cpTotals is what the summary's note says of the completed checkpoints:
// counts, maxima and sums exact; the p50 duration from a histogram once
// the history no longer holds every completed checkpoint.
type cpTotals struct {
	n                 int
	maxMs, maxAlignMs float64
	inflight, state   int64
	// durUs holds every completed checkpoint's duration (µs, three
	// significant digits).
	durUs *hdrhistogram.Histogram
	// dropped counts completed checkpoints no longer in the history.
	dropped int
}

// keep adds cs to the history, dropping the oldest past historyKeep, and
// to the totals. o.mu is held.
func (o *observer) keep(cs CheckpointStats) {
	if cs.Status == "completed" {
		d := &o.done
		if d.durUs == nil {
			d.durUs = hdrhistogram.New(1, 24*3600*1_000_000, 3)
		}
		d.n++
		d.maxMs = max(d.maxMs, cs.DurationMs)
		d.maxAlignMs = max(d.maxAlignMs, cs.MaxAlignmentMs)
		d.inflight += cs.InFlightBytes
		d.state = cs.StateBytes
		_ = d.durUs.RecordValue(max(1, int64(cs.DurationMs*1000)))
	}
	h := append(o.report.History, cs)
	if len(h) > 2*historyKeep {
		// Amortised: copy the newest down once the slice holds twice
		// what is kept.
		cut := len(h) - historyKeep
		for _, old := range h[:cut] {
			if old.Status == "completed" {
				o.done.dropped++
			}
		}
		h = append(h[:0:0], h[cut:]...)
	}
	o.report.History = h
}

// p50 is the median completed checkpoint's duration: exact (the upper
// median) while history holds every completed checkpoint, from the
// histogram after.
func (d *cpTotals) p50(history []CheckpointStats) float64 {
	if d.dropped > 0 {
		return float64(d.durUs.ValueAtQuantile(50)) / 1000
	}
	var durs []float64
	for _, h := range history {
		if h.Status == "completed" {
			durs = append(durs, h.DurationMs)
		}
	}
	slices.Sort(durs)
	return durs[len(durs)/2]
}
