package recordwise

import (
	"context"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// outChan is one output channel of a task: the network buffer being filled
// (plain int64 columns, turned into an Arrow batch when flushed), the items
// produced but not yet accepted by the channel (staged), and the channel.
type outChan struct {
	q      *queue
	cols   [][]int64
	n      int
	births []latEntry // hand-over times of the buffered rows
	first  time.Time  // when the first buffered row arrived
	// pendingWM: a watermark to emit right after the buffered rows.
	pendingWM bool
	wm        int64
	wmBorn    time.Time
	staged    []item
	sHead     int
	// replay: a buffered row was read again after a restore (traced runs).
	replay bool
}

func (oc *outChan) stagedLen() int { return len(oc.staged) - oc.sHead }

func (oc *outChan) stage(it item) { oc.staged = append(oc.staged, it) }

// overtake puts barrier b ahead of the data and watermarks this channel
// holds, queued or staged, and returns retained copies of what it overtook,
// in order. Like queue.pushPriority it never overtakes a marker: if one is
// still staged (a cancel, or an older barrier waiting for room), b is
// staged right after the last one and overtakes only the staged items
// behind it.
func (oc *outChan) overtake(b item, now time.Time) []item {
	last := -1
	for i := len(oc.staged) - 1; i >= oc.sHead; i-- {
		if oc.staged[i].kind.isMarker() {
			last = i
			break
		}
	}
	var over []item
	if last < 0 {
		over = oc.q.pushPriority(b, now)
	}
	for _, x := range oc.staged[max(last+1, oc.sHead):] {
		over = append(over, x.retained())
	}
	if last >= 0 {
		oc.staged = slices.Insert(oc.staged, last+1, b)
	}
	return over
}

// routeEdge is one network edge leaving a task: its exchange and the
// output channels it feeds, indexed by downstream subtask (a forward edge
// has exactly one).
type routeEdge struct {
	exchange job.Exchange
	keyCol   int
	outs     []*outChan
}

// router turns what the last operator of a chain emits into network
// buffers per output channel. A buffer is flushed into an item when it
// holds bufRows rows, when it is older than the buffer timeout, and before
// every watermark or barrier that must follow its rows.
type router struct {
	alloc   memory.Allocator
	schema  *arrow.Schema
	ncols   int
	bufRows int
	timeout time.Duration
	p       int
	outs    []*outChan // all output channels, in a fixed order
	edges   []routeEdge
	lastWM  int64
	sel     [][]int32 // per output channel of a hash edge: the rows it gets
	vals    [][]int64
	// replay: the rows being emitted were read again after a restore
	// (traced runs only).
	replay bool
	// sent, when set, is told the ids (column idCol) of the rows each
	// flush puts on a channel (trace --teach wall-clock only).
	sent  func(q *queue, ids []int64)
	idCol int
}

func newRouter(alloc memory.Allocator, schema *arrow.Schema, bufRows int, timeout time.Duration, p int) *router {
	return &router{alloc: alloc, schema: schema, ncols: schema.NumFields(), bufRows: bufRows,
		timeout: timeout, p: p, lastWM: operator.NoWatermark, vals: make([][]int64, schema.NumFields())}
}

func (r *router) addEdge(ex job.Exchange, keyCol int, qs []*queue) {
	e := routeEdge{exchange: ex, keyCol: keyCol}
	for _, q := range qs {
		oc := &outChan{q: q, cols: make([][]int64, r.ncols)}
		for i := range oc.cols {
			oc.cols[i] = make([]int64, 0, r.bufRows)
		}
		e.outs = append(e.outs, oc)
		r.outs = append(r.outs, oc)
	}
	r.edges = append(r.edges, e)
}

// note records that rows rows with the given hand-over times entered the
// buffer; call it before n changes (n == 0 marks the first row).
func (oc *outChan) note(births []latEntry, rows int64, now time.Time) {
	if oc.n == 0 {
		oc.first = now
	}
	oc.births = splitLat(oc.births, births, rows)
}

// emit routes the rows of b (borrowed) into the network buffers.
func (r *router) emit(b arrow.RecordBatch, births []latEntry, now time.Time) error {
	n := int(b.NumRows())
	if n == 0 {
		return nil
	}
	for c := 0; c < r.ncols; c++ {
		r.vals[c] = b.Column(c).(*array.Int64).Int64Values()
	}
	for _, e := range r.edges {
		switch e.exchange {
		case job.Hash:
			// The rows of each channel are selected first, then gathered
			// column by column: tight loops, no per-value append.
			if len(r.sel) < len(e.outs) {
				r.sel = make([][]int32, len(e.outs))
			}
			sel := r.sel[:len(e.outs)]
			for i := range sel {
				sel[i] = sel[i][:0]
			}
			for i, k := range r.vals[e.keyCol][:n] {
				d := keygroup.Owner(keygroup.Of(k), r.p)
				sel[d] = append(sel[d], int32(i))
			}
			for d, oc := range e.outs {
				rows := sel[d]
				if len(rows) == 0 {
					continue
				}
				for c := 0; c < r.ncols; c++ {
					oc.cols[c] = gather(oc.cols[c], r.vals[c], rows)
				}
				oc.note(births, int64(len(rows)), now)
				oc.n += len(rows)
				oc.replay = oc.replay || r.replay
			}
		default: // forward or broadcast: every row to every channel of the edge
			for _, oc := range e.outs {
				oc.note(births, int64(n), now)
				for c := 0; c < r.ncols; c++ {
					oc.cols[c] = append(oc.cols[c], r.vals[c]...)
				}
				oc.n += n
				oc.replay = oc.replay || r.replay
			}
		}
		for _, oc := range e.outs {
			if oc.n >= r.bufRows {
				r.flush(oc)
			}
		}
	}
	return nil
}

// gather appends v[rows] to dst.
func gather(dst, v []int64, rows []int32) []int64 {
	m := len(dst)
	dst = slices.Grow(dst, len(rows))[:m+len(rows)]
	out := dst[m:]
	for j, i := range rows {
		out[j] = v[i]
	}
	return dst
}

// flush turns oc's buffered rows into a staged data item.
func (r *router) flush(oc *outChan) {
	if oc.n > 0 {
		if r.sent != nil {
			r.sent(oc.q, oc.cols[r.idCol][:oc.n])
		}
		cols := make([]arrow.Array, r.ncols)
		for c := range cols {
			arr, vals := operator.AllocInt64(r.alloc, oc.n)
			copy(vals, oc.cols[c])
			cols[c] = arr
			oc.cols[c] = oc.cols[c][:0]
		}
		oc.stage(item{kind: kData, batch: operator.NewBatchOwning(r.schema, oc.n, cols...), births: oc.births, replay: oc.replay})
		oc.births, oc.replay = nil, false
		oc.n = 0
		oc.first = time.Time{}
	}
	if oc.pendingWM {
		oc.stage(item{kind: kWatermark, wm: oc.wm, born: oc.wmBorn})
		oc.pendingWM = false
	}
}

func (r *router) flushAll() {
	for _, oc := range r.outs {
		r.flush(oc)
	}
}

// flushDue flushes the buffers older than the buffer timeout.
func (r *router) flushDue(now time.Time) {
	for _, oc := range r.outs {
		if oc.n > 0 && now.Sub(oc.first) >= r.timeout {
			r.flush(oc)
		}
	}
}

// deadline is when the oldest buffer falls due, if any is non-empty.
func (r *router) deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	for _, oc := range r.outs {
		if oc.n > 0 {
			t := oc.first.Add(r.timeout)
			if !ok || t.Before(d) {
				d, ok = t, true
			}
		}
	}
	return d, ok
}

// watermark emits wm on every channel after the rows buffered so far.
func (r *router) watermark(wm int64, born time.Time) {
	if wm <= r.lastWM {
		return
	}
	r.lastWM = wm
	for _, oc := range r.outs {
		if oc.n == 0 {
			oc.stage(item{kind: kWatermark, wm: wm, born: born})
		} else {
			oc.pendingWM, oc.wm, oc.wmBorn = true, wm, born
		}
	}
}

// barrier emits the barrier of checkpoint id on every channel. In order,
// it follows every row emitted so far. Overtaking (unaligned), it is put at
// the head of each channel, and the rows and watermarks it overtook (queued
// in the channel or staged) are returned per channel, retained: they are
// the output channel state of the checkpoint.
func (r *router) barrier(id checkpoint.ID, born, now time.Time, overtaking bool) [][]item {
	r.flushAll()
	b := item{kind: kBarrier, id: id, born: born}
	if !overtaking {
		for _, oc := range r.outs {
			oc.stage(b)
		}
		return nil
	}
	state := make([][]item, len(r.outs))
	for i, oc := range r.outs {
		state[i] = oc.overtake(b, now)
	}
	return state
}

// cancel tells every consumer that checkpoint id was given up here.
func (r *router) cancel(id checkpoint.ID) {
	for _, oc := range r.outs {
		oc.stage(item{kind: kCancel, id: id})
	}
}

// drain pushes staged items into their channels as far as they accept
// them. It reports whether anything moved.
func (r *router) drain(now time.Time) bool {
	moved := false
	for _, oc := range r.outs {
		for oc.stagedLen() > 0 {
			if !oc.q.tryPush(oc.staged[oc.sHead], now) {
				break
			}
			oc.staged[oc.sHead] = item{}
			oc.sHead++
			moved = true
		}
		if oc.sHead == len(oc.staged) {
			oc.staged, oc.sHead = oc.staged[:0], 0
		}
	}
	return moved
}

// blocked reports whether some output is waiting for room in its channel.
func (r *router) blocked() bool {
	for _, oc := range r.outs {
		if oc.stagedLen() > 0 {
			return true
		}
	}
	return false
}

// release drops everything staged (teardown).
func (r *router) release() {
	for _, oc := range r.outs {
		for _, it := range oc.staged[oc.sHead:] {
			it.release()
		}
		oc.staged, oc.sHead = nil, 0
		oc.n = 0
	}
}

// sinkTail hands what the last operator of a chain emits to the sink.
// Rows go to the epoch the next checkpoint will cover.
//
// Flushing never stalls the task between barriers: the writer holding
// unflushed rows is handed to a flusher goroutine and the task goes on
// writing into a second writer of the same subtask (the sinks allow several
// writers per subtask: append numbers files per subtask and attempt,
// idempotent upserts decide by _version, transactional numbers the staged
// parts of an epoch per subtask and attempt). While a flush is in flight
// the chain's output is held in its operators (sinkdefer.go), so flushes
// grow with the load instead of queueing.
//
//   - Append and idempotent rows are handed over whenever some are pending
//     and the flusher is free: at low load a flush per input batch.
//   - Transactional rows are staged (pre-committed) in chunks of
//     txnChunkRows while the epoch runs; they become visible only when the
//     coordinator commits a checkpoint covering their epoch.
//
// At a barrier the flush in flight is awaited and everything written before
// the barrier is flushed synchronously before the task acknowledges.
type sinkTail struct {
	ws      [2]sink.Writer // ws[0] is written to; ws[1] is spare or being flushed
	mode    sink.Mode
	epoch   int64
	timeout time.Duration
	pending []latEntry
	rows    int64     // rows written to ws[0] since its last flush
	since   time.Time // first unflushed write
	obs     *observer
	// hold registers transactional rows staged in an epoch: they become
	// visible when a checkpoint covering it is committed.
	hold func(epoch int64, rows []latEntry)
	// published, if set, are rows already visible that a replay must not
	// publish again (see publishedRows); filtered batches come from alloc.
	published *publishedRows
	alloc     memory.Allocator

	// The asynchronous flush in progress, if any.
	inflight bool
	req      chan flushReq
	done     chan error
	wake     waker
	delay    time.Duration // added to every asynchronous flush (tests)
}

// txnChunkRows is how many transactional rows are staged at a time while an
// epoch runs, so the pre-commit at the barrier only stages the remainder.
var txnChunkRows int64 = 1 << 16

type flushReq struct {
	w       sink.Writer
	epoch   int64
	pending []latEntry
}

// flusher flushes handed-over writers, one at a time.
func (s *sinkTail) flusher(ctx context.Context, wg interface{ Done() }) {
	defer wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-s.req:
			if ctx.Err() != nil {
				return // a dead worker starts no write
			}
			if s.delay > 0 {
				select {
				case <-time.After(s.delay):
				case <-ctx.Done():
					return
				}
			}
			err := s.flushVisible(r.w, r.epoch, r.pending)
			select {
			case s.done <- err:
				s.wake.ring()
			case <-ctx.Done():
				return
			}
		}
	}
}

// flushVisible flushes w and records the latency of pending once the rows
// are visible: when the flush returns, or when a rolling sink publishes
// them (sink.VisibleFlusher). Transactional rows are accounted at commit.
func (s *sinkTail) flushVisible(w sink.Writer, epoch int64, pending []latEntry) error {
	if s.mode == sink.Transactional {
		return w.Flush(epoch)
	}
	if vf, ok := w.(sink.VisibleFlusher); ok {
		return vf.FlushVisible(epoch, func(at time.Time) { s.obs.recordLatency(pending, at) })
	}
	if err := w.Flush(epoch); err != nil {
		return err
	}
	s.obs.recordLatency(pending, time.Now())
	return nil
}

func (s *sinkTail) async() bool { return s.ws[1] != nil }

func (s *sinkTail) write(b arrow.RecordBatch, births []latEntry, now time.Time) error {
	if s.published != nil {
		// Rows already visible are not published again; their latency was
		// measured when they were.
		fb, owned, err := s.published.filter(b, s.alloc)
		if err != nil {
			return err
		}
		if owned {
			defer fb.Release()
			s.obs.addReplaysDropped(b.NumRows() - fb.NumRows())
			b = fb
		}
	}
	n := b.NumRows()
	if n == 0 {
		return nil
	}
	if err := s.ws[0].Write(s.epoch, b); err != nil {
		return err
	}
	s.obs.addRowsOut(n)
	s.pending = splitLat(s.pending, births, n)
	s.obs.handedOver(splitLat(nil, births, n), time.Now())
	s.rows += n
	if s.since.IsZero() {
		s.since = now
	}
	return nil
}

// deadline is when unflushed rows fall due: append and idempotent rows at
// once when the flusher is free (with a single writer, after the buffer
// timeout); transactional chunks when they are full, which flushDue checks
// after every input. While a flush is in flight the flusher rings the task
// when it is done.
func (s *sinkTail) deadline() (time.Time, bool) {
	if s.since.IsZero() || s.inflight {
		return time.Time{}, false
	}
	switch {
	case s.mode == sink.Transactional:
		if s.async() && s.rows >= txnChunkRows {
			return s.since, true
		}
		return time.Time{}, false
	case !s.async():
		return s.since.Add(s.timeout), true
	}
	return s.since, true
}

// poll collects the result of a finished asynchronous flush.
func (s *sinkTail) poll() error {
	if !s.inflight {
		return nil
	}
	select {
	case err := <-s.done:
		s.inflight = false
		return err
	default:
		return nil
	}
}

// wait blocks until the asynchronous flush in flight is done.
func (s *sinkTail) wait(ctx context.Context) error {
	if !s.inflight {
		return nil
	}
	select {
	case err := <-s.done:
		s.inflight = false
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushDue starts flushing the unflushed rows when they are due.
func (s *sinkTail) flushDue(ctx context.Context, now time.Time) error {
	if err := s.poll(); err != nil {
		return err
	}
	d, ok := s.deadline()
	if !ok || now.Before(d) {
		return nil
	}
	if !s.async() {
		return s.flushSync(s.epoch)
	}
	// Hand the written-to writer over and write into the spare one.
	s.inflight = true
	r := flushReq{w: s.ws[0], epoch: s.epoch, pending: s.pending}
	if s.mode == sink.Transactional {
		s.hold(s.epoch, s.pending)
	}
	s.ws[0], s.ws[1] = s.ws[1], s.ws[0]
	s.pending = nil
	s.rows = 0
	s.since = time.Time{}
	select {
	case s.req <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (s *sinkTail) flushSync(epoch int64) error {
	// A clone: s.pending's array is reused, and a rolling sink may report
	// the rows visible later.
	if err := s.flushVisible(s.ws[0], epoch, slices.Clone(s.pending)); err != nil {
		return err
	}
	s.pending = s.pending[:0]
	s.rows = 0
	s.since = time.Time{}
	return nil
}

// precommit flushes the epoch that barrier id closes, once an asynchronous
// flush in flight is done. It returns the rows that are durable but not
// visible yet (transactional), for the coordinator to account when it
// commits.
func (s *sinkTail) precommit(ctx context.Context, id checkpoint.ID) ([]latEntry, error) {
	epoch := int64(id)
	if s.epoch > epoch {
		// Cannot happen: barriers reach a task in increasing order.
		epoch = s.epoch
	}
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	var held []latEntry
	if s.mode == sink.Transactional {
		held = append(held, s.pending...)
	}
	if err := s.flushSync(epoch); err != nil {
		return nil, err
	}
	s.epoch = epoch + 1
	return held, nil
}

func (s *sinkTail) close() {
	for _, w := range s.ws {
		if w != nil {
			_ = w.Close()
		}
	}
}
