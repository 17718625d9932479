package diskphase

import "time"

// What a unit attempt in a worker process measures is the coordinator's:
// the worker keeps it for one attempt and hands it over, the hand-over
// stamps with every read, the counts with the result.

// drain returns the stamps made since the last drain and forgets them, so
// each is sent once.
func (h *handoverLog) drain() []procStamp {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []procStamp
	for s, ss := range h.split {
		for _, st := range ss.stamps {
			out = append(out, procStamp{Split: s, From: st.from, To: st.to, UnixNano: st.t.UnixNano()})
		}
		ss.stamps = nil
	}
	return out
}

// procCounts are the counts of this worker's metrics, by finite job.
func (m *metrics) procCounts() map[int]procCounts {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]procCounts{}
	for j, jm := range m.jobs {
		out[j] = procCounts{Bytes: jm.bytes, Files: int64(jm.files), RowsReread: jm.rowsReread}
	}
	return out
}

// addProcCounts adds what a worker process's attempt counted.
func (m *metrics) addProcCounts(counts map[int]procCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for j, c := range counts {
		jm := m.job(j)
		jm.bytes += c.Bytes
		jm.files += int(c.Files)
		jm.rowsReread += c.RowsReread
		m.bytesMat += c.Bytes
		m.filesMat += int(c.Files)
	}
}

// stamped applies a worker process's hand-over stamps.
func (h *handoverLog) stamped(stamps []procStamp) {
	for _, st := range stamps {
		h.stamp(st.Split, st.From, st.To, time.Unix(0, st.UnixNano))
	}
}
