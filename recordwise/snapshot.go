package recordwise

// This file holds a task's side of a checkpoint: the pending checkpoint
// it is aligning, flushing and snapshotting its operators, forwarding
// the barrier, pre-committing its sink, reporting its part complete or
// aborting it, and the final snapshot at the end of a bounded input.

import (
	"fmt"
	"slices"
	"time"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// pendingCk is what a task collects for the checkpoint it is taking.
type pendingCk struct {
	id          checkpoint.ID
	triggered   time.Time // barrier creation (coordinator trigger)
	firstAt     time.Time // first barrier reached this task
	flushed     bool
	snapshotted bool
	forwarded   bool
	pointDone   bool
	snapAt      time.Time // the synchronous part started: input is no longer held back
	sync        time.Duration
	unaligned   bool
	timedOut    bool
	blocked     bool // a channel was blocked (alignment under way)

	ops      []opSnap
	inState  map[int][]item
	outState [][]item
	inWM     []int64
	outWM    int64
	sources  []partitionState

	alignBytes, alignRecords int64 // processed between the first barrier and the snapshot
}

type opSnap struct {
	stage string
	parts []operator.KeyGroupState
}

func (ck *pendingCk) release() {
	for _, o := range ck.ops {
		operator.ReleaseStates(o.parts)
	}
	ck.ops = nil
	for _, its := range ck.inState {
		for _, it := range its {
			it.release()
		}
	}
	ck.inState = nil
	for _, its := range ck.outState {
		for _, it := range its {
			it.release()
		}
	}
	ck.outState = nil
}

// ckFlush flushes the chain once per checkpoint, before the first of the
// snapshot and the barrier: what the operators hold back belongs before
// the barrier.
func (t *task) ckFlush() {
	if t.ck.flushed {
		return
	}
	t.ck.flushed = true
	if err := t.flushChain(); err != nil {
		t.fail(err)
	}
}

// snapshot takes the synchronous part of the task's snapshot: a cheap copy
// of every stateful operator's key groups, and the watermarks.
func (t *task) snapshot(id checkpoint.ID, unaligned, timedOut bool) {
	if t.ck == nil || t.ck.id != id {
		t.fail(fmt.Errorf("task %s: snapshot of checkpoint %d without alignment", t.id, id))
		return
	}
	ck := t.ck
	start := time.Now()
	t.traceSnapshotStart(id, "")
	t.ckFlush()
	if !t.ok() {
		return
	}
	if !t.snapshotOperators(ck) {
		return
	}
	ck.inWM = slices.Clone(t.inWM)
	ck.outWM = t.wm
	ck.snapshotted, ck.unaligned, ck.timedOut = true, unaligned, timedOut
	if ck.snapAt.IsZero() {
		ck.snapAt = start
	}
	ck.sync += time.Since(start)
	t.afterSync()
}

// forward emits the barrier: on the network outputs (overtaking the queued
// output for an unaligned checkpoint), or into the sink, whose epoch it
// closes (pre-commit).
func (t *task) forward(id checkpoint.ID, overtaking bool) {
	ck := t.ck
	if ck == nil || ck.id != id {
		t.fail(fmt.Errorf("task %s: barrier %d forwarded without alignment", t.id, id))
		return
	}
	start := time.Now()
	t.ckFlush()
	if !t.ok() {
		return
	}
	if t.router != nil {
		st := t.router.barrier(id, ck.triggered, t.now, overtaking)
		if overtaking {
			ck.outState = st
		}
	}
	if !t.precommitSink(id) {
		return
	}
	ck.forwarded = true
	if ck.snapAt.IsZero() {
		ck.snapAt = start
	}
	ck.sync += time.Since(start)
	t.afterSync()
}

// beginCheckpoint makes id the task's pending checkpoint. A pending one that
// never finished here (it was given up) is released first, so its copied
// state and channel contents do not outlive it.
func (t *task) beginCheckpoint(id checkpoint.ID, triggered time.Time) *pendingCk {
	if t.ck != nil {
		t.ck.release()
	}
	t.ck = &pendingCk{id: id, triggered: triggered, firstAt: time.Now()}
	return t.ck
}

// precommitSink closes the sink's epoch id (the pre-commit of a
// transactional sink) and hands what it holds to the coordinator. It
// reports false when the task crashed at a named point or failed.
func (t *task) precommitSink(id checkpoint.ID) bool {
	if t.snk == nil {
		return true
	}
	if err := t.point(PointSinkBeforePrecommit); err != nil {
		t.fail(err)
		return false
	}
	held, err := t.snk.precommit(t.ctx, id)
	if err != nil {
		t.fail(err)
		return false
	}
	t.inc.coord.hold(id, held)
	if err := t.point(PointSinkAfterPrecommit); err != nil {
		t.fail(err)
		return false
	}
	return true
}

// snapshotOperators copies the state of every stateful operator of the
// chain into ck. It reports false when a snapshot failed (the task fails).
func (t *task) snapshotOperators(ck *pendingCk) bool {
	i, err := t.ops.Snapshot(func(i int, parts []operator.KeyGroupState) {
		ck.ops = append(ck.ops, opSnap{stage: t.ch.ops[i].ID, parts: parts})
	})
	if err != nil {
		t.fail(fmt.Errorf("task %s: snapshot of %s: %w", t.id, t.ch.ops[i].ID, err))
		return false
	}
	return true
}

func (t *task) afterSync() {
	if t.ck.snapshotted && t.ck.forwarded && !t.ck.pointDone {
		t.ck.pointDone = true
		t.fail(t.point(PointAfterSnapshot))
	}
}

// partComplete hands the part to an asynchronous writer; the task carries
// on processing.
func (t *task) partComplete(id checkpoint.ID) {
	ck := t.ck
	if ck == nil || ck.id != id {
		return
	}
	t.ck = nil
	if !ck.pointDone {
		ck.pointDone = true
		if err := t.point(PointAfterSnapshot); err != nil {
			t.fail(err)
			ck.release()
			return
		}
	}
	t.inc.writePart(t, ck, time.Now())
}

// abort drops what the task holds for checkpoint id, declines it, and
// tells downstream not to wait for its barrier.
func (t *task) abort(id checkpoint.ID, reason string) {
	if t.ck != nil && t.ck.id == id {
		t.ck.release()
		t.ck = nil
	}
	delete(t.timers, id)
	if t.router != nil {
		t.router.cancel(id)
	}
	t.inc.coord.decline(id, t.id, reason)
}

// finalSnapshot takes the task's part of the final checkpoint of a bounded
// run. Every task has ended, so nothing is in flight anywhere and each task
// snapshots on the coordinator's word, without a barrier: there is no
// channel left to carry one.
func (t *task) finalSnapshot(id checkpoint.ID, at time.Time) {
	ck := t.beginCheckpoint(id, at)
	start := time.Now()
	t.traceSnapshotStart(id, "final")
	t.ckFlush()
	if !t.ok() {
		return
	}
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
	// No barrier travels, so nothing aligns or overtakes: the part is
	// labelled with the run's barrier mode, never "aligned" in an
	// unaligned run.
	ck.snapshotted, ck.unaligned = true, t.inc.mode.IsUnaligned()
	ck.snapAt = start
	ck.sync = time.Since(start)
	t.partComplete(id)
}
