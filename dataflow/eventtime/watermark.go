// Package eventtime computes watermarks from what the sources have handed
// over. It is a pure value type: executors feed it batches and positions and
// read the watermark back; it never reads a clock.
//
// The rule (the job model's contract): the watermark is the minimum, over all
// source partitions of the job, of the greatest event time read from that
// partition, minus the job's max-disorder bound. A partition that has not
// produced a row yet holds the watermark at NoWatermark; an exhausted
// partition stops holding it back.
package eventtime

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/operator"
)

// Tracker tracks the greatest event time per partition.
//
// Order matters to the caller: observe a batch, deliver all of its rows to
// the operators, and only then advance them to the new Watermark. Advancing
// first would make rows of that same batch late.
type Tracker struct {
	maxTS       []int64
	done        []bool
	maxDisorder int64
}

// NewTracker tracks n partitions (over every input of the job).
func NewTracker(n int, maxDisorder int64) *Tracker {
	t := &Tracker{maxTS: make([]int64, n), done: make([]bool, n), maxDisorder: maxDisorder}
	for i := range t.maxTS {
		t.maxTS[i] = operator.NoWatermark
	}
	return t
}

// Observe records the event times in column tsCol of a batch read from
// partition p.
func (t *Tracker) Observe(p int, batch arrow.RecordBatch, tsCol int) {
	ts := batch.Column(tsCol).(*array.Int64).Int64Values()
	m := t.maxTS[p]
	for _, v := range ts {
		if v > m {
			m = v
		}
	}
	t.maxTS[p] = m
}

// ObserveTS records a single event time for partition p.
func (t *Tracker) ObserveTS(p int, ts int64) {
	if ts > t.maxTS[p] {
		t.maxTS[p] = ts
	}
}

// Finish marks partition p exhausted: it no longer holds the watermark back.
func (t *Tracker) Finish(p int) { t.done[p] = true }

// Watermark returns the current watermark: EndOfTime once every partition is
// exhausted.
func (t *Tracker) Watermark() int64 {
	wm := operator.EndOfTime
	for i, m := range t.maxTS {
		if t.done[i] {
			continue
		}
		if m == operator.NoWatermark {
			return operator.NoWatermark
		}
		if m < wm {
			wm = m
		}
	}
	if wm == operator.EndOfTime {
		return wm
	}
	if wm < operator.NoWatermark+t.maxDisorder {
		// Saturate: event times near the int64 minimum must not wrap round
		// to a watermark in the far future.
		return operator.NoWatermark
	}
	return wm - t.maxDisorder
}

// State is the serialisable form of a Tracker, saved inside recovery points
// so a restored job agrees on which rows are late.
type State struct {
	MaxTS []int64 `json:"max_ts"`
	Done  []bool  `json:"done"`
}

// State returns a copy of the tracker's state.
func (t *Tracker) State() State {
	return State{MaxTS: append([]int64(nil), t.maxTS...), Done: append([]bool(nil), t.done...)}
}

// Restore replaces the tracker's state; the partition count must match.
func (t *Tracker) Restore(s State) bool {
	if len(s.MaxTS) != len(t.maxTS) || len(s.Done) != len(t.done) {
		return false
	}
	copy(t.maxTS, s.MaxTS)
	copy(t.done, s.Done)
	return true
}
