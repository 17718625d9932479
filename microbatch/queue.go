package microbatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// chunk is one batch handed over by a source reader.
type chunk struct {
	b        arrow.RecordBatch
	start    int64     // position of the first row
	handover time.Time // when the reader returned it
	maxTS    int64     // greatest event time in the chunk
}

func (c *chunk) end() int64 { return c.start + c.b.NumRows() }

// partQueue holds what one partition's reader has handed over and no
// committed batch has consumed yet. It belongs to the worker that owns the
// partition and dies with it.
type partQueue struct {
	mu     sync.Mutex
	chunks []chunk
	rows   int64 // rows held
	pos    int64 // position after the last chunk (the read position)
	eof    bool
	err    error
	closed bool
	// need is the position a batch waits for: the reader reads up to it
	// even when it holds its limit.
	need    int64
	changed chan struct{} // closed and replaced whenever the above changes
}

func newPartQueue(pos int64) *partQueue {
	return &partQueue{pos: pos, changed: make(chan struct{})}
}

func (q *partQueue) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// push appends a chunk; the queue takes over the batch reference.
func (q *partQueue) push(c chunk) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		c.b.Release()
		return
	}
	q.chunks = append(q.chunks, c)
	q.rows += c.b.NumRows()
	q.pos = c.end()
	q.notifyLocked()
}

func (q *partQueue) finish(pos int64, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		q.err = err
	} else {
		q.eof = true
		q.pos = max(q.pos, pos)
	}
	q.notifyLocked()
}

// available returns the read position (the end of what is held) and
// whether the partition is exhausted there.
func (q *partQueue) available() (pos int64, eof bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pos, q.eof, q.err
}

// paused reports whether a reader holding limit rows should wait, and the
// channel that signals a change.
func (q *partQueue) paused(limit int64) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rows >= limit && q.pos >= q.need, q.changed
}

// waitFor blocks until the queue holds data up to end (or the partition
// ended, or failed), ctx is done or stop is closed.
func (q *partQueue) waitFor(ctx context.Context, end int64, stop <-chan struct{}) error {
	q.mu.Lock()
	if end > q.need {
		q.need = end
		q.notifyLocked()
	}
	q.mu.Unlock()
	for {
		q.mu.Lock()
		pos, eof, err, ch := q.pos, q.eof, q.err, q.changed
		q.mu.Unlock()
		switch {
		case err != nil:
			return err
		case pos >= end || eof:
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errWorkerKilled
		}
	}
}

// slice is part of a chunk taken for a batch.
type slice struct {
	b        arrow.RecordBatch
	handover time.Time
}

// take returns zero-copy slices covering [start, end) in order; the caller
// releases them. Rows a forgetful source could not give back (positions
// before the first chunk) are simply absent.
func (q *partQueue) take(start, end int64) []slice {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []slice
	for i := range q.chunks {
		c := &q.chunks[i]
		lo, hi := max(start, c.start), min(end, c.end())
		if lo >= hi {
			continue
		}
		var b arrow.RecordBatch
		if lo == c.start && hi == c.end() {
			b = c.b
			b.Retain()
		} else {
			b = c.b.NewSlice(lo-c.start, hi-c.start)
		}
		out = append(out, slice{b: b, handover: c.handover})
	}
	return out
}

// maxTS returns the greatest event time in [start, end), or NoWatermark.
func (q *partQueue) maxTS(start, end int64) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	m := operator.NoWatermark
	for i := range q.chunks {
		c := &q.chunks[i]
		lo, hi := max(start, c.start), min(end, c.end())
		if lo >= hi {
			continue
		}
		if lo == c.start && hi == c.end() {
			m = max(m, c.maxTS)
			continue
		}
		ts := c.b.Column(source.IdxTS).(*array.Int64).Int64Values()[lo-c.start : hi-c.start]
		for _, v := range ts {
			m = max(m, v)
		}
	}
	return m
}

// release drops every chunk that ends at or before pos: a committed batch
// consumed it.
func (q *partQueue) release(pos int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := 0
	for ; i < len(q.chunks) && q.chunks[i].end() <= pos; i++ {
		q.rows -= q.chunks[i].b.NumRows()
		q.chunks[i].b.Release()
		q.chunks[i] = chunk{}
	}
	if i > 0 {
		q.chunks = q.chunks[i:]
		q.notifyLocked()
	}
}

// close releases everything: the owning worker is gone.
func (q *partQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range q.chunks {
		c.b.Release()
	}
	q.chunks, q.rows, q.closed = nil, 0, true
	q.notifyLocked()
}

// partReader is the goroutine that reads one partition ahead of the
// batches, so the records are in memory when a batch is planned.
type partReader struct {
	part   *partition
	q      *partQueue
	reader source.Reader
	done   chan struct{}
}

// readerConfig is what a reader loop needs from its coordinator.
type readerConfig struct {
	rows   int   // rows per Next
	limit  int64 // rows held before the reader pauses
	faults *fault.Injector
	onRead func(n int64)
	// report, in a worker process, tells the coordinator of each read
	// (global partition, records, position after them) and waits for its
	// answer: the coordinator counts and decides the faults there.
	report  func(g int, n, pos int64)
	onCrash func(*fault.Crash)
	stop    <-chan struct{} // the owning worker was killed
}

// loop reads until EOF, an error, ctx is done or the worker is killed.
func (pr *partReader) loop(ctx context.Context, cfg readerConfig) {
	defer close(pr.done)
	for {
		if wait, ch := pr.q.paused(cfg.limit); wait {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			case <-cfg.stop:
				return
			}
		}
		select {
		case <-cfg.stop:
			return
		default:
		}
		b, pos, err := pr.reader.Next(ctx, cfg.rows)
		if errors.Is(err, io.EOF) {
			pr.q.finish(pos.Offset, nil)
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			pr.q.finish(0, fmt.Errorf("reading %s partition %s: %w", pr.part.input, pr.part.name, err))
			return
		}
		now := time.Now()
		n := b.NumRows()
		if n == 0 {
			b.Release()
			continue
		}
		ts := b.Column(source.IdxTS).(*array.Int64).Int64Values()
		m := operator.NoWatermark
		for _, v := range ts {
			m = max(m, v)
		}
		pr.q.push(chunk{b: b, start: pos.Offset - n, handover: now, maxTS: m})
		if cfg.onRead != nil {
			cfg.onRead(n)
		}
		if cfg.report != nil {
			cfg.report(pr.part.global, n, pos.Offset)
		}
		if err := cfg.faults.Read(n); err != nil {
			if c, ok := fault.AsCrash(err); ok {
				cfg.onCrash(c)
			}
		}
	}
}
