package report

import "github.com/HdrHistogram/hdrhistogram-go"

// A long run's series is kept in bounded memory. Up to seriesMaxBuckets
// buckets are kept at SeriesBucketMs (about 55 minutes); when the run goes
// past that, neighbouring buckets are merged in pairs and the width
// doubles (200 ms up to 1 h 49 min, 400 ms up to 3 h 38 min, ...), so the
// series always spans the whole run in at most seriesMaxBuckets buckets.
// Counts merge by adding, so every total over the series stays exact; what
// is lost is resolution, which is also what the catch-up bill is measured
// to (its times are to a bucket's end).
//
// Recovery-point events are thinned the same way: once there are more
// than twice seriesMaxBuckets, the completed ones keep only the first of each
// bucket (a failed or aborted point, a rewind and the end of re-reading
// are always kept: the bill reads them, and they come with crashes, not
// with time).
const seriesMaxBuckets = 1 << 15

// fold merges the buckets in pairs and doubles the width. r.mu is held.
// (r.maxBuckets is seriesMaxBuckets; a test makes it small.)
func (r *SeriesRecorder) fold() {
	n := (len(r.acc) + 1) / 2
	for k := range n {
		a := r.acc[2*k]
		if 2*k+1 < len(r.acc) {
			a = mergeAcc(a, r.acc[2*k+1], r)
		}
		r.acc[k] = a
	}
	clear(r.acc[n:])
	r.acc = r.acc[:n]
	// A merged bucket is closed once its second half is.
	r.rolled /= 2
	hists := make(map[int]*hdrhistogram.Histogram, len(r.hists))
	for i, h := range r.hists {
		j := i / 2
		if o, ok := hists[j]; ok {
			o.Merge(h)
			r.release(h)
			continue
		}
		hists[j] = h
	}
	r.hists = hists
	r.newestLat /= 2
	r.width *= 2
	r.thinPoints()
}

// mergeAcc is buckets a and b (b the later) as one: counts added, the
// end-of-bucket figures b's, the latency histograms merged.
func mergeAcc(a, b bucketAcc, r *SeriesRecorder) bucketAcc {
	m := bucketAcc{processed: a.processed + b.processed, reread: a.reread + b.reread, visible: a.visible + b.visible,
		pos: b.pos, hwUnpaced: b.hwUnpaced, baseUnpaced: b.baseUnpaced}
	switch {
	case a.hist != nil && b.hist != nil:
		a.hist.Merge(b.hist)
		r.release(b.hist)
		m.hist, m.latency = a.hist, histLatency(a.hist)
	case a.hist != nil:
		m.hist, m.latency = a.hist, a.latency
	case b.hist != nil:
		m.hist, m.latency = b.hist, b.latency
	}
	return m
}

// release returns a histogram no bucket holds to the pool. r.mu is held.
func (r *SeriesRecorder) release(h *hdrhistogram.Histogram) {
	h.Reset()
	r.pool = append(r.pool, h)
}

// addPoint appends a recovery-point event, thinning the completed ones
// when there are too many. r.mu is held.
func (r *SeriesRecorder) addPoint(e SeriesEvent) {
	r.events = append(r.events, e)
	if len(r.events) > 2*r.maxBuckets {
		r.thinPoints()
	}
}

// thinPoints keeps, of the completed recovery points, the first in each
// bucket at the current width, and every other event. r.mu is held.
func (r *SeriesRecorder) thinPoints() {
	if len(r.events) <= r.maxBuckets {
		return
	}
	widthMs := Millis(r.width)
	kept := r.events[:0]
	last := -1
	for _, e := range r.events {
		if e.Status == PointCompleted {
			b := int(e.TMs / widthMs)
			if b == last {
				continue
			}
			last = b
		}
		kept = append(kept, e)
	}
	clear(r.events[len(kept):])
	r.events = kept
}
