package report

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Kinds of SeriesEvent the recorder adds besides recovery points and
// crashes: the read position moved below what had been read already
// (re-reading starts), and every partition is back at its high-water
// mark (re-reading is over).
const (
	EventRewind     = "rewind"
	EventRereadDone = "reread_done"
)

// Point statuses of SeriesRecorder.Point.
const (
	PointCompleted = "completed"
	PointFailed    = "failed"
	PointAborted   = "aborted"
)

// latencyWindow is how many buckets behind the newest latency record a
// bucket keeps its histogram before it is reduced to percentiles and the
// histogram reused: visibility times reach the recorder a little out of
// order across goroutines, never by a second.
const latencyWindow = 10

// SeriesRecorder records a run over time (Series) as it runs: the read
// positions of every source partition (fed by a wrapped source, see
// run.Execute), the rows made visible and their latency, and the recovery
// points. It is cheap: one lock per batch read or made visible, never per
// record. Every method is safe on a nil recorder, which records nothing.
type SeriesRecorder struct {
	start       time.Time
	width       time.Duration
	maxBuckets  int // seriesMaxBuckets
	keepLatency bool
	now         func() time.Time // time.Now; a test's clock

	mu     sync.Mutex
	paced  []func(time.Time) int64
	parts  []*seriesPart
	acc    []bucketAcc
	rolled int // buckets before it have their end-of-bucket figures
	// Sums over partitions: read position (the furthest live reader of
	// each), high-water mark, and the high-water mark of unpaced inputs
	// (their offered records). sumPos and sumHW leave out the partitions
	// whose executor reports its own positions (series_own.go): their
	// positions are in sumPosOwn, and replaying counts those re-reading.
	sumPos, sumHW, sumHWUnpaced int64
	sumPosOwn                   int64
	replaying                   int
	// sumBaseUnpaced is where the unpaced partitions were first opened:
	// not offered in this run.
	sumBaseUnpaced int64
	events         []SeriesEvent
	hists          map[int]*hdrhistogram.Histogram
	pool           []*hdrhistogram.Histogram
	newestLat      int
}

type bucketAcc struct {
	processed, reread, visible int64
	// At the bucket's end.
	pos, hwUnpaced, baseUnpaced int64
	latency                     *Latency
	hist                        *hdrhistogram.Histogram
}

type seriesPart struct {
	unpaced bool
	opened  bool
	// own: the executor reports the positions (SeriesInput), not readers;
	// replay: it took records below hw and has not finished them again.
	own, replay bool
	hw, pos     int64
	readers     []*SeriesReader
}

// SeriesReader is one opened reader of a partition as the recorder sees it.
type SeriesReader struct {
	r      *SeriesRecorder
	part   *seriesPart
	pos    int64
	closed bool
}

// NewSeriesRecorder starts a recorder at start with buckets of
// SeriesBucketMs; keepLatency keeps a latency histogram per bucket
// (otherwise only counts).
func NewSeriesRecorder(start time.Time, keepLatency bool) *SeriesRecorder {
	return &SeriesRecorder{start: start, width: SeriesBucketMs * time.Millisecond, maxBuckets: seriesMaxBuckets, keepLatency: keepLatency,
		now: time.Now, hists: map[int]*hdrhistogram.Histogram{}}
}

// Start is the moment the series counts from.
func (r *SeriesRecorder) Start() time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.start
}

// Input registers a source with partitions partitions; due, when not nil,
// is its schedule (records due by a moment, summed over its partitions),
// otherwise what it offers is what was read of it for the first time. The
// result indexes Open's part argument: the first partition's index.
func (r *SeriesRecorder) Input(partitions int, due func(time.Time) int64) int {
	return r.input(partitions, due, false)
}

func (r *SeriesRecorder) input(partitions int, due func(time.Time) int64, own bool) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	first := len(r.parts)
	for range partitions {
		r.parts = append(r.parts, &seriesPart{unpaced: due == nil, own: own})
	}
	if due != nil {
		r.paced = append(r.paced, due)
	}
	return first
}

// bucket is the index of the bucket holding t (0 before the start).
func (r *SeriesRecorder) bucket(t time.Time) int {
	d := t.Sub(r.start)
	if d < 0 {
		return 0
	}
	return int(d / r.width)
}

// grow makes bucket i exist, folding the series into buckets twice as
// wide first when it would hold more than seriesMaxBuckets; it returns
// bucket i's index after any fold. r.mu is held.
func (r *SeriesRecorder) grow(i int) int {
	for i >= r.maxBuckets {
		r.fold()
		i /= 2
	}
	for len(r.acc) <= i {
		r.acc = append(r.acc, bucketAcc{})
	}
	return i
}

// roll closes the buckets before the one of now with the position sums
// as they stand, before now's change applies. r.mu is held.
func (r *SeriesRecorder) roll(now time.Time) int {
	i := r.grow(r.bucket(now))
	for ; r.rolled < i; r.rolled++ {
		r.closeBucket(r.rolled)
	}
	return i
}

// closeBucket keeps bucket i's end-of-bucket sums. r.mu is held.
func (r *SeriesRecorder) closeBucket(i int) {
	a := &r.acc[i]
	a.pos, a.hwUnpaced, a.baseUnpaced = r.sumPos+r.sumPosOwn, r.sumHWUnpaced, r.sumBaseUnpaced
}

// setPos recomputes part's position: its furthest live reader; kept when
// none is live. r.mu is held.
func (r *SeriesRecorder) setPos(p *seriesPart) {
	pos, live := int64(-1), false
	for _, rd := range p.readers {
		if !rd.closed {
			pos, live = max(pos, rd.pos), true
		}
	}
	if !live {
		return
	}
	r.sumPos += pos - p.pos
	p.pos = pos
}

// behind reports whether any partition is re-reading: a reader is below
// its high-water mark, or an executor replays what it took before. r.mu
// is held.
func (r *SeriesRecorder) behind() bool {
	return r.sumHW-r.sumPos > 0 || r.replaying > 0
}

// gapChanged notes a rewind or the end of re-reading: the run was not
// behind (before) and now is, or the other way. r.mu is held.
func (r *SeriesRecorder) gapChanged(before bool, now time.Time) {
	after := r.behind()
	switch {
	case !before && after:
		r.events = append(r.events, SeriesEvent{TMs: Millis(now.Sub(r.start)), Kind: EventRewind})
	case before && !after:
		r.events = append(r.events, SeriesEvent{TMs: Millis(now.Sub(r.start)), Kind: EventRereadDone})
	}
}

// Open records a reader of partition part (Input's index plus the
// partition's) opened at offset: a restore moves the position back.
func (r *SeriesRecorder) Open(part int, offset int64) *SeriesReader {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.roll(now)
	p := r.parts[part]
	if p.own {
		// Its executor reports the positions; the first open is only
		// where it starts.
		r.openOwn(p, offset)
		return nil
	}
	if !p.opened {
		// What came before the first position was read by an earlier
		// process (--resume): neither offered nor read here.
		p.opened, p.hw, p.pos = true, offset, offset
		r.sumHW += offset
		r.sumPos += offset
		if p.unpaced {
			r.sumHWUnpaced += offset
			r.sumBaseUnpaced += offset
		}
	}
	// Readers closed long ago are dropped, so the list stays short.
	live := p.readers[:0]
	for _, rd := range p.readers {
		if !rd.closed {
			live = append(live, rd)
		}
	}
	rd := &SeriesReader{r: r, part: p, pos: offset}
	p.readers = append(live, rd)
	gapBefore := r.behind()
	r.setPos(p)
	r.gapChanged(gapBefore, now)
	return rd
}

// Read records a batch of rows read, ending at offset after.
func (rd *SeriesReader) Read(rows, after int64) {
	if rd == nil || rows <= 0 {
		return
	}
	r := rd.r
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	i := r.roll(now)
	p := rd.part
	before := after - rows
	reread := max(0, min(after, p.hw)-before)
	b := &r.acc[i]
	b.processed += rows
	b.reread += reread
	gapBefore := r.behind()
	if after > p.hw {
		r.sumHW += after - p.hw
		if p.unpaced {
			r.sumHWUnpaced += after - p.hw
		}
		p.hw = after
	}
	rd.pos = after
	r.setPos(p)
	r.gapChanged(gapBefore, now)
}

// Close records the reader closed; the partition keeps its position
// until another reader opens.
func (rd *SeriesReader) Close() {
	if rd == nil {
		return
	}
	rd.r.mu.Lock()
	rd.closed = true
	rd.r.mu.Unlock()
}

// Visible records n groups of rows made visible at at: entry(i) is group
// i's rows and their latency (negative: not known).
func (r *SeriesRecorder) Visible(at time.Time, n int, entry func(i int) (latency time.Duration, rows int64)) {
	if r == nil || n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.grow(r.bucket(at))
	var h *hdrhistogram.Histogram
	if r.keepLatency {
		// A bucket already reduced to percentiles takes no more: late
		// records go to the oldest one still open.
		i = max(i, r.newestLat-latencyWindow)
		h = r.histogram(i)
		if i > r.newestLat {
			r.newestLat = i
			r.reduce(i - latencyWindow)
		}
	}
	for k := range n {
		d, rows := entry(k)
		r.acc[i].visible += rows
		if h != nil && d >= 0 {
			_ = h.RecordValues(clampMicros(d), rows)
		}
	}
}

func clampMicros(d time.Duration) int64 {
	return min(max(d.Microseconds(), 1), int64(time.Minute/time.Microsecond))
}

// histogram is bucket i's histogram, made (or reused) on first use.
func (r *SeriesRecorder) histogram(i int) *hdrhistogram.Histogram {
	if h, ok := r.hists[i]; ok {
		return h
	}
	var h *hdrhistogram.Histogram
	if n := len(r.pool); n > 0 {
		h, r.pool = r.pool[n-1], r.pool[:n-1]
	} else {
		// Two significant digits up to a minute keep one small.
		h = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	}
	r.hists[i] = h
	return h
}

// reduce turns the histograms of buckets up to last into percentiles.
func (r *SeriesRecorder) reduce(last int) {
	for i, h := range r.hists {
		if i > last {
			continue
		}
		delete(r.hists, i)
		a := &r.acc[i]
		if a.hist != nil {
			// A fold paired this bucket with one already reduced.
			a.hist.Merge(h)
			a.latency = histLatency(a.hist)
			r.release(h)
			continue
		}
		a.latency = histLatency(h)
		if h.TotalCount() > 0 {
			// Kept for LatencyBetween, so not reused.
			a.hist = h
			continue
		}
		r.release(h)
	}
}

func histLatency(h *hdrhistogram.Histogram) *Latency {
	if h.TotalCount() == 0 {
		return nil
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return &Latency{P50: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)), Max: ms(h.Max())}
}

// Point records a recovery point (kind: checkpoint, batch, finite job)
// reaching status now.
func (r *SeriesRecorder) Point(kind string, id int64, status string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addPoint(SeriesEvent{TMs: Millis(r.now().Sub(r.start)), Kind: kind, ID: id, Status: status})
}

// PointTook is Point with the recovery point's duration d.
func (r *SeriesRecorder) PointTook(kind string, id int64, status string, d time.Duration) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := Millis(d)
	r.addPoint(SeriesEvent{TMs: Millis(r.now().Sub(r.start)), Kind: kind, ID: id, Status: status, DurationMs: &ms})
}

// Series is what was recorded up to end: buckets up to the one holding
// end, and the events. Phases are the caller's (BillSeries).
func (r *SeriesRecorder) Series(end time.Time) *Series {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grow(r.bucket(end))
	for ; r.rolled < len(r.acc); r.rolled++ {
		r.closeBucket(r.rolled)
	}
	r.reduce(len(r.acc))
	widthMs := Millis(r.width)
	s := &Series{BucketMs: widthMs, Buckets: make([]Bucket, len(r.acc)),
		Events: append([]SeriesEvent(nil), r.events...)}
	// Offered so far at the run's start: where the feeds began.
	prev := r.offered(r.start, 0)
	for i, a := range r.acc {
		bEnd := r.start.Add(time.Duration(i+1) * r.width)
		if bEnd.After(end) {
			bEnd = end // the last bucket is cut short by the run's end
		}
		o := r.offered(bEnd, a.hwUnpaced)
		grown := o - a.baseUnpaced // where an unpaced feed began is not offered here
		s.Buckets[i] = Bucket{TMs: float64(i) * widthMs, Offered: max(0, grown-prev), Processed: a.processed,
			Reread: a.reread, Lag: max(0, o-a.pos), Visible: a.visible, Latency: a.latency, Hist: a.hist}
		prev = grown
	}
	return s
}

// offered is the records offered by t, as positions: what the paced
// inputs had due, and what was read of the others.
func (r *SeriesRecorder) offered(t time.Time, hwUnpaced int64) int64 {
	o := hwUnpaced
	for _, due := range r.paced {
		o += due(t)
	}
	return o
}
