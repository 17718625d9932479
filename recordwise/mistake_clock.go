package recordwise

// This file holds recordwise's wall-clock mistake of `rewind trace
// --teach` (package mistake): every task saves on its own clock, with no
// marker. It is made only when run.Env.Mistake names it, which only trace
// sets.

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// wallClock says the run makes the wall-clock mistake: every task saves
// its part when its own clock reaches the instant the coordinator names,
// and no marker travels. Clocks on different machines are apart; here the
// sources' clocks lag the other tasks' at odd checkpoints and lead them at
// even ones, by the time a part takes to save. Each task saves what it
// has at its instant, but the channels are not empty: a record a sender
// emitted before it saved (its saved read position is past it) that the
// receiver had not taken before it saved is in neither part, and is lost
// after a restore; one emitted after the sender saved and taken before
// the receiver saved is in the receiver's state and is read again, so
// counted twice.
func (c *coordLoop) wallClock() bool { return c.inc.env.Mistake.Is(mistake.WallClock) }

// clockLedger counts, per channel, the rows a sender emitted (by id, in
// order) and the rows its receiver took, and at each wall-clock cut how
// far each side had got. Made only for the wall-clock mistake.
type clockLedger struct {
	plan  *mistake.Plan
	mu    sync.Mutex
	chans map[*queue]*clockChan
	cuts  map[checkpoint.ID]map[*queue]*clockCut
	// wait is the checkpoint whose second group of tasks is told once
	// every task of the first acknowledged (coordinator loop only).
	wait *clockWait
}

// clockWait is a wall-clock checkpoint whose tasks save in phases, each
// phase told once every task of the one before has saved.
type clockWait struct {
	id      checkpoint.ID
	at      time.Time
	waiting map[checkpoint.TaskID]bool
	phases  [][]*task // the phases not yet told
}

// clockTrigger starts wall-clock checkpoint id. The clocks of the sources
// of even subtasks lead, so they save first; then the tasks that are not
// sources; the sources of odd subtasks lag and save last. Every cut so
// has records counted twice on the channels of the first and lost on
// those of the last.
func (c *coordLoop) clockTrigger(id checkpoint.ID, at time.Time) {
	phases := make([][]*task, 3)
	for _, t := range c.inc.tasks {
		switch {
		case t.src == nil:
			phases[1] = append(phases[1], t)
		case t.sub%2 == 0:
			phases[0] = append(phases[0], t)
		default:
			phases[2] = append(phases[2], t)
		}
	}
	c.clock.wait = &clockWait{id: id, at: at, phases: phases}
	c.clockNext()
}

// clockNext tells the next phase of tasks that is not empty to save.
func (c *coordLoop) clockNext() {
	w := c.clock.wait
	for len(w.phases) > 0 && len(w.phases[0]) == 0 {
		w.phases = w.phases[1:]
	}
	if len(w.phases) == 0 {
		c.clock.wait = nil
		return
	}
	w.waiting = map[checkpoint.TaskID]bool{}
	for _, t := range w.phases[0] {
		w.waiting[t.id] = true
	}
	for _, t := range w.phases[0] {
		t.post(ctrlMsg{kind: ctrlClock, id: w.id, at: w.at})
	}
	w.phases = w.phases[1:]
}

// clockAcked tells the next phase of tasks once the one before has saved
// its parts of checkpoint id.
func (c *coordLoop) clockAcked(id checkpoint.ID, task checkpoint.TaskID) {
	if c.clock == nil || c.clock.wait == nil || c.clock.wait.id != id {
		return
	}
	w := c.clock.wait
	delete(w.waiting, task)
	if len(w.waiting) == 0 {
		c.clockNext()
	}
}

// clockChan is one channel's traffic: the ids of the rows flushed into it
// in order, and how many rows the receiver took.
type clockChan struct {
	from, to string
	sent     []int64
	taken    int64
}

// clockCut is one channel at one cut: the sender's emitted count (rows
// flushed, then buffered: the ids still in its buffer) and the
// receiver's taken count.
type clockCut struct {
	sentAt, takenAt   int64
	senderIn, takerIn bool
	flushed           int64
	buffered          []int64
}

// newClockLedger makes the ledger when the run makes the wall-clock
// mistake and wires every router to it.
func (c *coordLoop) newClockLedger() {
	if !c.wallClock() {
		return
	}
	l := &clockLedger{plan: c.inc.env.Mistake, chans: map[*queue]*clockChan{}, cuts: map[checkpoint.ID]map[*queue]*clockCut{}}
	c.clock = l
	for _, t := range c.inc.tasks {
		for _, q := range t.in {
			l.channel(q).to = string(t.id)
		}
		if t.router == nil {
			continue
		}
		for _, oc := range t.router.outs {
			l.channel(oc.q).from = string(t.id)
		}
		if idx := t.router.schema.FieldIndices("id"); len(idx) == 1 {
			t.router.sent = l.sent
			t.router.idCol = idx[0]
		}
	}
}

func (l *clockLedger) channel(q *queue) *clockChan {
	ch := l.chans[q]
	if ch == nil {
		ch = &clockChan{}
		l.chans[q] = ch
	}
	return ch
}

// sent notes the ids of rows flushed into q.
func (l *clockLedger) sent(q *queue, ids []int64) {
	l.mu.Lock()
	l.channel(q).sent = append(l.channel(q).sent, ids...)
	l.mu.Unlock()
}

// clockTaken notes that t took item it from input channel c.
func (t *task) clockTaken(c int, it item) {
	l := t.inc.coord.clock
	if l == nil || it.kind != kData || it.batch == nil {
		return
	}
	l.mu.Lock()
	l.channel(t.in[c]).taken += it.batch.NumRows()
	l.mu.Unlock()
}

// cut notes how far task t's channels had got when it saved its part of
// checkpoint id.
func (l *clockLedger) cut(t *task, id checkpoint.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cuts := l.cuts[id]
	if cuts == nil {
		cuts = map[*queue]*clockCut{}
		l.cuts[id] = cuts
	}
	at := func(q *queue) *clockCut {
		if cuts[q] == nil {
			cuts[q] = &clockCut{}
		}
		return cuts[q]
	}
	for _, q := range t.in {
		k := at(q)
		k.takenAt, k.takerIn = l.channel(q).taken, true
	}
	if t.router == nil || t.router.sent == nil {
		return
	}
	for _, oc := range t.router.outs {
		k := at(oc.q)
		k.flushed = int64(len(l.channel(oc.q).sent))
		k.buffered = slices.Clone(oc.cols[t.router.idCol][:oc.n])
		k.sentAt, k.senderIn = k.flushed+int64(oc.n), true
	}
}

// logCut logs, once checkpoint id is complete, the records each channel
// had in flight at its cut, by id: lost where the sender had emitted more
// than the receiver took, counted twice where the receiver took more.
func (l *clockLedger) logCut(id checkpoint.ID) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	cuts := l.cuts[id]
	delete(l.cuts, id)
	qs := slices.Collect(func(yield func(*queue) bool) {
		for q := range cuts {
			if !yield(q) {
				return
			}
		}
	})
	slices.SortFunc(qs, func(a, b *queue) int {
		x, y := l.chans[a], l.chans[b]
		if x.from+x.to < y.from+y.to {
			return -1
		}
		if x.from+x.to > y.from+y.to {
			return 1
		}
		return 0
	})
	for _, q := range qs {
		k, ch := cuts[q], l.chans[q]
		if !k.senderIn || !k.takerIn || k.sentAt == k.takenAt {
			continue
		}
		// A row flushed since the sender saved is in sent; one still
		// buffered then and not flushed since, in buffered.
		idAt := func(i int64) int64 {
			if i < int64(len(ch.sent)) {
				return ch.sent[i]
			}
			return k.buffered[i-k.flushed]
		}
		from, to, note := k.takenAt, k.sentAt, "lost: emitted before the sender saved, not taken before the receiver saved"
		if k.takenAt > k.sentAt {
			from, to, note = k.sentAt, k.takenAt, "twice: taken before the receiver saved, emitted after the sender saved"
		}
		var ids []int64
		for i := from; i < to; i++ {
			ids = append(ids, idAt(i))
		}
		l.plan.Did(mistake.Step{Point: int64(id), Task: ch.to, From: from, To: to, IDs: ids,
			Note: fmt.Sprintf("%s (channel %s->%s, rows From..To)", note, ch.from, ch.to)})
	}
}

// clockSnapshot takes the task's part of wall-clock checkpoint id on the
// coordinator's word, with no marker: what it holds at this instant.
func (t *task) clockSnapshot(id checkpoint.ID, at time.Time) {
	ck := t.beginCheckpoint(id, at)
	start := time.Now()
	t.traceSnapshotStart(id, "wall clock, no marker")
	t.ckFlush()
	if !t.ok() {
		return
	}
	t.inc.coord.clock.cut(t, id)
	if !t.precommitSink(id) {
		return
	}
	ck.forwarded = true
	if !t.snapshotOperators(ck) {
		return
	}
	if t.src != nil {
		ck.sources = t.src.positions()
	}
	ck.inWM = slices.Clone(t.inWM)
	ck.outWM = t.wm
	ck.snapshotted, ck.unaligned = true, t.inc.mode.IsUnaligned()
	ck.snapAt = start
	ck.sync = time.Since(start)
	t.partComplete(id)
}
