package recordwise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// sourceHead is the input side of a source task: the partitions it reads,
// each through a reader goroutine that prefetches a batch or two, and the
// event-time tracker over those partitions. The recorded read position of a
// partition is the position after the last batch the task emitted, never
// what the reader prefetched.
type sourceHead struct {
	input    string
	parts    []*partReader
	tracker  *eventtime.Tracker
	rr       int
	finished bool // every partition reached its end (reported)
}

type partReader struct {
	local int // index in sourceHead.parts and the tracker
	index int // partition index in the source
	name  string
	pos   source.Position
	r     source.Reader
	ch    chan readResult
	eof   bool
}

type readResult struct {
	b   arrow.RecordBatch
	pos source.Position
	err error
}

// readLoop prefetches batches of one partition for the task.
func readLoop(ctx context.Context, p *partReader, rows int, wake waker, wg interface{ Done() }) {
	defer wg.Done()
	for {
		b, pos, err := p.r.Next(ctx, rows)
		select {
		case p.ch <- readResult{b: b, pos: pos, err: err}:
			wake.ring()
		case <-ctx.Done():
			if b != nil {
				b.Release()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

// openSourceHead opens the partitions of src that subtask sub of p reads:
// partition k goes to subtask k mod p. restored maps partition names to
// their saved state (nil: from the start).
func openSourceHead(ctx context.Context, input string, src source.Source, sub, p int, maxDisorder int64,
	restored map[string]partitionState, alloc memory.Allocator) (*sourceHead, error) {
	h := &sourceHead{input: input}
	names := src.Partitions()
	for k, name := range names {
		if k%p != sub {
			continue
		}
		pr := &partReader{local: len(h.parts), index: k, name: name, ch: make(chan readResult, 1)}
		pr.pos = source.Position{Partition: name}
		if st, ok := restored[name]; ok {
			pr.pos.Offset = st.Offset
		}
		h.parts = append(h.parts, pr)
	}
	h.tracker = eventtime.NewTracker(len(h.parts), maxDisorder)
	for _, pr := range h.parts {
		if st, ok := restored[pr.name]; ok {
			if st.MaxTS != operator.NoWatermark {
				h.tracker.ObserveTS(pr.local, st.MaxTS)
			}
			if st.Done {
				h.tracker.Finish(pr.local)
			}
		}
	}
	for _, pr := range h.parts {
		r, err := src.Open(ctx, pr.index, pr.pos, alloc)
		if err != nil {
			h.release()
			return nil, fmt.Errorf("opening %s partition %s at %d: %w", input, pr.name, pr.pos.Offset, err)
		}
		pr.r = r
		pr.pos.Partition = pr.name
	}
	return h, nil
}

// release drops prefetched batches and closes the readers (teardown, after
// the reader goroutines stopped). It returns the records forgetful
// readers could not give back.
func (h *sourceHead) release() int64 {
	var lost int64
	for _, p := range h.parts {
		for {
			select {
			case r := <-p.ch:
				if r.b != nil {
					r.b.Release()
				}
				continue
			default:
			}
			break
		}
		if p.r != nil {
			lost += p.r.Lost()
			_ = p.r.Close()
			p.r = nil
		}
	}
	return lost
}

func (h *sourceHead) positions() []partitionState {
	st := h.tracker.State()
	out := make([]partitionState, len(h.parts))
	for i, p := range h.parts {
		out[i] = partitionState{Input: h.input, Partition: p.name, Offset: p.pos.Offset, MaxTS: st.MaxTS[i], Done: st.Done[i]}
	}
	return out
}

// sourceStep emits at most one prefetched batch, taking the partitions in
// turn.
func (t *task) sourceStep() bool {
	h := t.src
	n := len(h.parts)
	for k := 0; k < n; k++ {
		p := h.parts[(h.rr+k)%n]
		if p.eof {
			continue
		}
		var res readResult
		select {
		case res = <-p.ch:
		default:
			continue
		}
		h.rr = p.local + 1
		t.onRead(p, res)
		return true
	}
	t.maybeFinished()
	return false
}

func (t *task) onRead(p *partReader, res readResult) {
	h := t.src
	switch {
	case errors.Is(res.err, io.EOF):
		p.eof = true
		h.tracker.Finish(p.local)
		t.maybeFinished()
		return
	case res.err != nil:
		if res.b != nil {
			res.b.Release()
		}
		if t.ctx.Err() != nil {
			t.dead = true
			return
		}
		t.fail(fmt.Errorf("reading %s partition %s: %w", h.input, p.name, res.err))
		return
	}
	b := res.b
	defer b.Release()
	n := b.NumRows()
	if err := t.inc.env.Faults.Read(n); err != nil {
		t.fail(err)
		if !t.ok() {
			return
		}
	}
	if tr := t.inc.env.Trace; tr != nil {
		// The rows of a read that had been read before go out marked.
		if replay := tr.Read(string(t.id), p.name, p.pos.Offset, res.pos.Offset); replay && t.router != nil {
			t.router.replay = true
			defer func() { t.router.replay = false }()
		}
	}
	p.pos = res.pos
	if t.inc.opts.hooks.triggerAfter != nil {
		t.inc.countForTrigger(n)
	}
	t.inc.obs.read(h.input, p.name, res.pos.Offset, n, t.now)
	h.tracker.Observe(p.local, b, source.IdxTS)
	t.curBirths = append(t.curBirths[:0], latEntry{born: t.now, rows: n})
	if err := t.head(0, b); err != nil {
		t.fail(err)
		return
	}
	if err := t.chainDone(); err != nil {
		t.fail(err)
		return
	}
	if t.inc.plan.job.UsesEventTime {
		if wm := h.tracker.Watermark(); wm > t.wm {
			t.advance(wm)
		}
	}
}

// maybeFinished reports, once, that every partition is exhausted, after
// the final watermark has been emitted.
func (t *task) maybeFinished() {
	h := t.src
	if h.finished || !t.ok() {
		return
	}
	for _, p := range h.parts {
		if !p.eof {
			return
		}
	}
	h.finished = true
	t.curBirths = append(t.curBirths[:0], latEntry{born: t.now, rows: 1})
	if t.inc.plan.job.UsesEventTime {
		t.advance(operator.EndOfTime)
	}
	if err := t.flushChain(); err != nil {
		t.fail(err)
		return
	}
	if t.router != nil {
		t.router.flushAll()
	}
	t.inc.coord.sourceFinished(t.id)
}

// triggerSource starts checkpoint id at a source task: the recorded read
// positions are those after the last batch emitted, and the barrier goes
// right after that batch's rows (or, unaligned, ahead of the rows still
// queued in the channels, which are then persisted with the part).
func (t *task) triggerSource(id checkpoint.ID, at time.Time) {
	ck := t.beginCheckpoint(id, at)
	start := time.Now()
	t.traceSnapshotStart(id, "")
	t.ckFlush()
	if !t.ok() {
		return
	}
	unaligned := t.inc.mode.IsUnaligned()
	if t.router != nil {
		st := t.router.barrier(id, at, t.now, unaligned)
		if unaligned {
			ck.outState = st
		}
	}
	ck.forwarded = true
	if !t.precommitSink(id) {
		return
	}
	if !t.snapshotOperators(ck) {
		return
	}
	ck.sources = t.src.positions()
	t.misplaceCut(id, ck.sources) // trace --teach only
	ck.outWM = t.wm
	ck.snapshotted, ck.unaligned = true, unaligned
	ck.snapAt = start
	ck.sync = time.Since(start)
	t.partComplete(id)
}
