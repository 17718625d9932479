package recordwise

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// task runs one subtask of one chain on one goroutine: it takes input
// (source partitions or network channels), runs the chain's operators by
// function call, and hands the result to its router (network channels) or
// its sink writer. All of its state is owned by that goroutine; other
// goroutines reach it only through its control mailbox and its channels.
//
// The loop never blocks inside an operator call: output goes to staged
// items and the loop stops taking input while any are staged
// (backpressure). While blocked it still consumes barriers and cancel
// markers at the heads of its input channels, so that an unaligned barrier
// that overtook the queued data is handled at once.
type task struct {
	inc    *incarnation
	id     checkpoint.TaskID
	ch     *chain
	sub    int // subtask index, also the worker
	ctx    context.Context
	alloc  memory.Allocator
	wake   waker
	ctrlMu sync.Mutex
	ctrl   []ctrlMsg

	ops operator.Chain // the chain's operators, linked to tail

	// network input
	in        []*queue
	inWM      []int64
	handler   *barrier.Handler[item]
	rr        int
	nextReady time.Time
	lastBornB time.Time // born of the last barrier read (trigger time)

	src *sourceHead

	// inFrom and inChan are the sending lanes and names of the input
	// channels, outChan the names of the output channels (traced runs).
	inFrom, inChan, outChan []string

	router *router
	snk    *sinkTail

	wm        int64      // watermark delivered to the chain
	curBirths []latEntry // hand-over times of the input being processed
	// deferred: the chain ends in the sink and has not been flushed since
	// its last input, whose hand-over times pendBirths holds (sinkdefer.go).
	deferred   bool
	pendBirths []latEntry
	now        time.Time

	ck        *pendingCk
	timers    map[checkpoint.ID]time.Time
	busyUntil time.Time // sink throttle (Options.SinkTaskRate)
	rate      float64

	ended   bool // the task's input ended and it ended its outputs
	stopped bool // a source stopped by the coordinator (stop-the-world)

	err  error
	dead bool

	// remote, in the coordinator of a run with worker processes, is how
	// control reaches the task, which runs in a worker process; nothing
	// else of this task is set then but its identity (proccoord.go).
	remote func(ctrlMsg)
}

type ctrlKind uint8

const (
	ctrlTrigger ctrlKind = iota + 1 // sources: inject barrier id
	ctrlAbort                       // the coordinator gave checkpoint id up
	ctrlEnd                         // sources: every source is exhausted, end the channels
	ctrlFinal                       // every task has ended: take the final checkpoint id
	ctrlStop                        // sources: read nothing until ctrlResume (stop-the-world)
	ctrlResume
	ctrlClock // every task: save your part of checkpoint id now, no marker (wall-clock)
)

type ctrlMsg struct {
	kind ctrlKind
	id   checkpoint.ID
	at   time.Time
}

func (t *task) post(m ctrlMsg) {
	if t.remote != nil {
		t.remote(m)
		return
	}
	t.ctrlMu.Lock()
	t.ctrl = append(t.ctrl, m)
	t.ctrlMu.Unlock()
	t.wake.ring()
}

// run is the task's loop.
func (t *task) run() {
	defer t.inc.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if t.ctx.Err() != nil || t.dead {
			return
		}
		progress := t.step()
		if t.err != nil {
			t.inc.fail(t.err, t.id) // never a crash: fail carried those out
			return
		}
		if t.dead || t.ctx.Err() != nil {
			return
		}
		if progress {
			continue
		}
		if d, ok := t.deadline(); ok {
			wait := time.Until(d)
			if wait <= 0 {
				continue
			}
			timer.Reset(wait)
			select {
			case <-t.wake:
			case <-timer.C:
			case <-t.ctx.Done():
				return
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		}
		select {
		case <-t.wake:
		case <-t.ctx.Done():
			return
		}
	}
}

// fail records a task error. A *fault.Crash is carried out (the named
// worker dies); anything else fails the job.
func (t *task) fail(err error) {
	if err == nil {
		return
	}
	if cr, ok := fault.AsCrash(err); ok {
		t.inc.crash(cr, t.id)
		if cr.Worker == t.sub || cr.Worker < 0 {
			t.dead = true
		}
		return
	}
	if t.ctx.Err() != nil {
		t.dead = true
		return
	}
	if t.err == nil {
		t.err = err
	}
}

// point passes the named crash point as the task's worker. Like any step
// of the task, it returns its failure (a *fault.Crash when a fault fires)
// and the caller hands it to fail, which carries it out.
func (t *task) point(name string) error {
	return t.inc.reach(name, t.sub, t.id)
}

func (t *task) ok() bool { return t.err == nil && !t.dead && t.ctx.Err() == nil }

func (t *task) step() bool {
	t.now = time.Now()
	progress := t.control()
	if !t.ok() {
		return false
	}
	t.fireTimers()
	if t.snk != nil && t.ok() {
		t.fail(t.sinkReady())
	}
	if !t.ok() {
		return false
	}
	if t.router != nil && t.router.drain(t.now) {
		progress = true
	}
	if t.acceptsInput() {
		if t.input() {
			progress = true
		}
	} else if t.markers() {
		progress = true
	}
	if t.ok() && t.router != nil && t.router.drain(t.now) {
		progress = true
	}
	return progress
}

func (t *task) acceptsInput() bool {
	if t.router != nil && t.router.blocked() {
		return false
	}
	if !t.busyUntil.IsZero() && t.now.Before(t.busyUntil) {
		return false
	}
	return true
}

func (t *task) control() bool {
	t.ctrlMu.Lock()
	msgs := t.ctrl
	t.ctrl = nil
	t.ctrlMu.Unlock()
	for _, m := range msgs {
		if !t.ok() {
			return false
		}
		switch m.kind {
		case ctrlTrigger:
			if t.src != nil {
				t.triggerSource(m.id, m.at)
			}
		case ctrlAbort:
			if t.handler != nil {
				t.exec(t.handler.Step(barrier.Cancel{Checkpoint: m.id}))
			}
		case ctrlEnd:
			if t.src != nil && !t.ended {
				t.end()
			}
		case ctrlFinal:
			t.finalSnapshot(m.id, m.at)
		case ctrlClock:
			t.clockSnapshot(m.id, m.at)
		case ctrlStop, ctrlResume:
			t.stopped = m.kind == ctrlStop
		}
	}
	return len(msgs) > 0
}

func (t *task) fireTimers() {
	if t.router != nil {
		t.router.flushDue(t.now)
	}
	if t.snk != nil {
		if err := t.snk.flushDue(t.ctx, t.now); err != nil {
			t.fail(err)
			return
		}
	}
	for id, at := range t.timers {
		if !t.now.Before(at) {
			delete(t.timers, id)
			t.exec(t.handler.Step(barrier.TimerFired{Checkpoint: id}))
			if !t.ok() {
				return
			}
		}
	}
}

// deadline is the next time the loop must wake without being rung.
func (t *task) deadline() (time.Time, bool) {
	var d time.Time
	ok := false
	use := func(x time.Time, has bool) {
		if has && (!ok || x.Before(d)) {
			d, ok = x, true
		}
	}
	if t.router != nil {
		use(t.router.deadline())
	}
	if t.snk != nil {
		use(t.snk.deadline())
	}
	for _, at := range t.timers {
		use(at, true)
	}
	use(t.nextReady, !t.nextReady.IsZero())
	use(t.busyUntil, !t.busyUntil.IsZero() && t.busyUntil.After(t.now))
	return d, ok
}

// input takes some input: a batch from a source partition, or items from
// the input channels in turn.
func (t *task) input() bool {
	if t.src != nil {
		if t.stopped {
			return false
		}
		return t.sourceStep()
	}
	t.nextReady = time.Time{}
	progress := false
	for budget := 0; budget < 64 && t.ok() && t.acceptsInput(); budget++ {
		took := false
		n := len(t.in)
		for k := 0; k < n; k++ {
			c := (t.rr + k) % n
			if t.handler.Blocked(barrier.Channel(c)) {
				continue
			}
			it, ok, readyAt := t.in[c].take(t.now, nil)
			if !ok {
				if !readyAt.IsZero() && (t.nextReady.IsZero() || readyAt.Before(t.nextReady)) {
					t.nextReady = readyAt
				}
				continue
			}
			t.rr = c + 1
			t.onItem(c, it)
			took = true
			break
		}
		if !took {
			break
		}
		progress = true
	}
	return progress
}

// markers consumes barriers and cancel markers at the heads of the input
// channels while the task takes no data (its output is blocked).
func (t *task) markers() bool {
	if t.src != nil || !t.ok() {
		return false
	}
	progress := false
	for c := range t.in {
		if t.handler.Blocked(barrier.Channel(c)) {
			continue
		}
		it, ok, _ := t.in[c].take(t.now, isMarker)
		if !ok {
			continue
		}
		t.onItem(c, it)
		progress = true
		if !t.ok() {
			break
		}
	}
	return progress
}

func isMarker(it item) bool { return it.kind == kBarrier || it.kind == kCancel }

// onItem hands one input item to the barrier handler and carries out what
// it decides.
func (t *task) onItem(c int, it item) {
	t.clockTaken(c, it)
	if tr := t.inc.env.Trace; tr != nil {
		t.traceItem(tr, c, it)
	}
	ch := barrier.Channel(c)
	switch it.kind {
	case kData, kWatermark:
		t.exec(t.handler.Step(barrier.Record[item]{Channel: ch, Item: barrier.Item[item]{Value: it, Records: it.rows(), Bytes: it.bytes()}}))
	case kBarrier:
		t.lastBornB = it.born
		t.exec(t.handler.Step(barrier.Barrier{Channel: ch, Checkpoint: it.id}))
	case kCancel:
		t.exec(t.handler.Step(barrier.Cancel{Checkpoint: it.id}))
	case kEnd:
		t.exec(t.handler.Step(barrier.EndOfChannel{Channel: ch}))
	}
}

// exec carries out the actions of one handler Step. Nothing it calls
// steps the handler again, so the slice (the handler's buffer) stays valid
// throughout.
func (t *task) exec(actions []barrier.Action) {
	for _, a := range actions {
		if !t.ok() {
			// A dead task does nothing more; items handed to it in this
			// call are released at teardown only if still queued, so
			// release the ones it owns here.
			if p, ok := a.(*barrier.Process[item]); ok {
				p.Item.Value.release()
			}
			continue
		}
		switch a := a.(type) {
		case *barrier.Process[item]:
			t.processItem(int(a.Channel), a.Item.Value)
		case barrier.AlignmentStarted:
			t.beginCheckpoint(a.Checkpoint, t.lastBornB)
		case barrier.BlockChannel:
			if tr := t.inc.env.Trace; tr != nil {
				tr.Record(spacetime.Event{Kind: spacetime.BlockStart, Lane: string(t.id), Channel: t.inChan[a.Channel],
					Worker: t.sub, ID: int64(a.Checkpoint)})
			}
			if t.ck != nil && !t.ck.blocked {
				t.ck.blocked = true
				t.fail(t.point(PointDuringAlignment))
			}
		case barrier.Buffered:
			// Never happens: the loop does not read blocked channels.
		case barrier.Snapshot:
			t.snapshot(a.Checkpoint, a.Unaligned, a.TimedOut)
		case barrier.ForwardBarrier:
			t.forward(a.Checkpoint, a.Overtaking)
		case barrier.PersistChannelState[item]:
			if t.ck != nil && t.ck.id == a.Checkpoint {
				if t.ck.inState == nil {
					t.ck.inState = map[int][]item{}
				}
				t.ck.inState[int(a.Channel)] = append(t.ck.inState[int(a.Channel)], a.Item.Value.retained())
			}
		case barrier.StartTimer:
			if t.timers == nil {
				t.timers = map[checkpoint.ID]time.Time{}
			}
			t.timers[a.Checkpoint] = t.now.Add(a.After)
		case barrier.CancelTimer:
			delete(t.timers, a.Checkpoint)
		case barrier.PartComplete:
			t.partComplete(a.Checkpoint)
		case barrier.AbortCheckpoint:
			t.abort(a.Checkpoint, a.Reason.String())
		case barrier.InputEnded:
			t.end()
		case barrier.UnblockChannel:
			if tr := t.inc.env.Trace; tr != nil {
				tr.Record(spacetime.Event{Kind: spacetime.BlockEnd, Lane: string(t.id), Channel: t.inChan[a.Channel], Worker: t.sub})
			}
		case barrier.Fail:
			t.fail(a.Err)
		}
	}
}

// processItem runs the chain on one data or watermark item of channel c
// and releases it.
func (t *task) processItem(c int, it item) {
	defer it.release()
	switch it.kind {
	case kData:
		if t.ck != nil && !t.ck.snapshotted {
			t.ck.alignBytes += it.bytes()
			t.ck.alignRecords += int64(it.rows())
		}
		port, _ := t.ch.channelPort(c, t.sub, t.inc.plan.parallelism)
		t.curBirths = it.births
		if it.replay && t.router != nil {
			t.router.replay = true
			defer func() { t.router.replay = false }()
		}
		if err := t.head(port, it.batch); err != nil {
			t.fail(err)
			return
		}
		if err := t.chainDone(); err != nil {
			t.fail(err)
			return
		}
		if t.rate > 0 {
			if t.busyUntil.Before(t.now) {
				t.busyUntil = t.now
			}
			t.busyUntil = t.busyUntil.Add(time.Duration(float64(it.rows()) / t.rate * float64(time.Second)))
		}
	case kWatermark:
		if it.wm > t.inWM[c] {
			t.inWM[c] = it.wm
		}
		if m := slices.Min(t.inWM); m > t.wm {
			t.curBirths = append(t.curBirths[:0:0], latEntry{born: it.born, rows: 1})
			t.advance(m)
		}
	}
}

// head feeds a batch to the first operator of the chain (or straight to
// the tail of an operator-less chain).
func (t *task) head(port int, b arrow.RecordBatch) error {
	return t.ops.Process(port, b)
}

func (t *task) tail(b arrow.RecordBatch) error {
	switch {
	case t.router != nil:
		return t.router.emit(b, t.curBirths, t.now)
	case t.snk != nil:
		return t.snk.write(b, t.curBirths, t.now)
	}
	return nil
}

// flushChain flushes every operator in chain order, so what one emits on
// Flush is processed (and flushed) by the next; deferred output first.
func (t *task) flushChain() error {
	if err := t.flushDeferred(); err != nil {
		return err
	}
	return t.ops.Flush()
}

// advance delivers watermark wm to the chain and emits it downstream.
func (t *task) advance(wm int64) {
	if wm <= t.wm {
		return
	}
	t.wm = wm
	if err := t.flushDeferred(); err != nil {
		t.fail(err)
		return
	}
	if err := t.ops.AdvanceWatermark(wm); err != nil {
		t.fail(err)
		return
	}
	if t.router != nil {
		t.router.watermark(wm, t.wmBorn())
	}
}

// wmBorn is the hand-over time a watermark emitted now carries: that of
// the oldest input being processed.
func (t *task) wmBorn() time.Time {
	if len(t.curBirths) == 0 {
		return t.now
	}
	return t.curBirths[0].born
}

// end ends the task once its input has ended (for a source: once the
// coordinator says every source is exhausted): everything held back is
// flushed and every output channel is ended after it.
func (t *task) end() {
	t.ended = true
	if err := t.flushChain(); err != nil {
		t.fail(err)
		return
	}
	if t.router != nil {
		t.router.flushAll()
		for _, oc := range t.router.outs {
			oc.stage(item{kind: kEnd})
		}
	}
	t.inc.coord.taskEnded(t.id)
}

// release frees everything the task holds except its source readers,
// which the incarnation releases to count what they lost (teardown, after
// its goroutine and every goroutine feeding it have stopped).
func (t *task) release() {
	if t.ck != nil {
		t.ck.release()
		t.ck = nil
	}
	if t.router != nil {
		t.router.release()
	}
	if t.snk != nil {
		t.snk.close()
	}
	for i := 0; i < t.ops.Len(); i++ {
		if lc, ok := t.ops.Op(i).(operator.LateCounter); ok {
			t.inc.obs.addLate(lc.LateRows())
		}
	}
	_ = t.ops.Close()
}
