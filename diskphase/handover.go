package diskphase

import (
	"sync"
	"time"
)

// handoverLog remembers when the source handed each record over, so the
// latency of a record (hand-over to visible at its job's commit) can be
// measured. It is measurement, kept by the harness: a record re-read by a
// re-run keeps the time it was first handed over, so a crash shows in the
// latency of exactly the records it delayed.
type handoverLog struct {
	mu    sync.Mutex
	split map[int]*splitStamps
}

type splitStamps struct {
	hi     int64 // offsets below hi are stamped (or already visible)
	stamps []stamp
}

// stamp says records [from, to) of a split were handed over at t.
type stamp struct {
	from, to int64
	t        time.Time
}

func newHandoverLog() *handoverLog { return &handoverLog{split: map[int]*splitStamps{}} }

// stamp notes that records [from, to) of split s were read at t.
func (h *handoverLog) stamp(s int, from, to int64, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := h.split[s]
	if ss == nil {
		ss = &splitStamps{}
		h.split[s] = ss
	}
	from = max(from, ss.hi)
	if to <= from {
		return
	}
	ss.stamps = append(ss.stamps, stamp{from: from, to: to, t: t})
	ss.hi = to
}

// visible records the latency of every record a committed job made visible
// and forgets their stamps.
func (h *handoverLog) visible(x *execution, a actCommit, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, end := range a.Commit.Ends {
		ss := h.split[s]
		if ss == nil {
			continue
		}
		keep := ss.stamps[:0]
		for _, st := range ss.stamps {
			if st.from < end {
				n := min(st.to, end) - st.from
				x.met.mu.Lock()
				x.met.latency.Record(now.Sub(st.t), n)
				x.met.mu.Unlock()
				x.met.series.Visible(now, 1, func(int) (time.Duration, int64) { return now.Sub(st.t), n })
				st.from = min(st.to, end)
			}
			if st.to > st.from {
				keep = append(keep, st)
			}
		}
		ss.stamps = keep
		ss.hi = max(ss.hi, end)
	}
}
