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
//
// A stamp is kept per read batch until its job commits, so a long finite
// job (the whole bounded input, by default) would keep one for every batch
// of it. A split keeps at most maxStamps: when it has that many, neighbour
// stamps of adjacent ranges merge in pairs, stamped with their
// records' mean hand-over time. The mean latency stays exact; a record's
// own time is then off by at most the span its merged stamp covers
// (up to about 15 000 records for 60 M over two splits, 20 ms at 1.5 M
// records/s), far below the latency of such a job.
type handoverLog struct {
	mu    sync.Mutex
	split map[int]*splitStamps
}

// maxStamps is the most stamps a split keeps before they merge.
const maxStamps = 1 << 12

type splitStamps struct {
	hi     int64 // offsets below hi are stamped (or already visible)
	stamps []stamp
	// limit is maxStamps, doubled when a merge could not halve the
	// stamps (ranges with gaps between them, from a forgetful input, do
	// not merge), so that merging stays rare.
	limit int
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
		ss = &splitStamps{limit: maxStamps}
		h.split[s] = ss
	}
	from = max(from, ss.hi)
	if to <= from {
		return
	}
	ss.stamps = append(ss.stamps, stamp{from: from, to: to, t: t})
	ss.hi = to
	if len(ss.stamps) >= ss.limit {
		ss.merge()
	}
}

// merge merges neighbour stamps of adjacent ranges in pairs.
func (ss *splitStamps) merge() {
	out := ss.stamps[:0]
	for i := 0; i < len(ss.stamps); i++ {
		a := ss.stamps[i]
		if i+1 < len(ss.stamps) && ss.stamps[i+1].from == a.to {
			b := ss.stamps[i+1]
			na, nb := a.to-a.from, b.to-b.from
			// The records' mean time: a's records at a.t, b's at b.t.
			a.t = a.t.Add(time.Duration(float64(b.t.Sub(a.t)) * float64(nb) / float64(na+nb)))
			a.to = b.to
			i++
		}
		out = append(out, a)
	}
	clear(ss.stamps[len(out):])
	ss.stamps = out
	if len(out) > ss.limit/2 {
		ss.limit *= 2
	}
}

// visible calls record with the latency of every record a committed job
// made visible (records of split s below ends[s]), in groups of records
// stamped alike, and forgets their stamps.
func (h *handoverLog) visible(ends []int64, now time.Time, record func(latency time.Duration, records int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s, end := range ends {
		ss := h.split[s]
		if ss == nil {
			continue
		}
		keep := ss.stamps[:0]
		for _, st := range ss.stamps {
			if st.from < end {
				record(now.Sub(st.t), min(st.to, end)-st.from)
				st.from = min(st.to, end)
			}
			if st.to > st.from {
				keep = append(keep, st)
			}
		}
		clear(ss.stamps[len(keep):])
		ss.stamps = keep
		ss.hi = max(ss.hi, end)
	}
}
