package recordwise

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// coordLoop is the I/O loop around the pure checkpoint.Coordinator: it
// triggers checkpoints on a ticker, turns task acknowledgements into
// coordinator inputs, writes the metadata object, commits the sink when a
// checkpoint completes, and deletes what the coordinator says to delete.
// It also ends a bounded run: once every source is exhausted it triggers a
// final checkpoint and, when that one is complete and committed, the job is
// done.
type coordLoop struct {
	inc *incarnation
	co  *checkpoint.Coordinator

	wake   waker
	mu     sync.Mutex
	events []coordEvent
	held   map[checkpoint.ID][]latEntry
	timers []*time.Timer

	sources  []*task
	finished map[checkpoint.TaskID]bool
	ended    map[checkpoint.TaskID]bool
	final    bool          // every source is exhausted: no more periodic checkpoints
	endSent  bool          // the sources were told to end their channels
	drained  bool          // every task has ended: nothing is in flight
	finalID  checkpoint.ID // the checkpoint that will end the run
	finalErr int           // final checkpoints abandoned in a row
	metrics  map[checkpoint.ID][]TaskCheckpointStats
	dead     bool
	stw      *stopWorld   // the stop-the-world checkpoint in progress, if any
	clock    *clockLedger // the channels' traffic, for the wall-clock mistake
	// fwd, in a worker process, takes the tasks' events to the
	// coordinator's loop (procworker.go); this loop then never runs.
	fwd coordForwarder
}

// coordForwarder takes a worker process's task events to its coordinator.
type coordForwarder interface {
	event(coordEvent)
	hold(id checkpoint.ID, rows []latEntry)
}

// maxFinalAttempts bounds how often the final checkpoint is retried: with
// nothing in flight it only fails if storage does.
const maxFinalAttempts = 10

type coordEventKind uint8

const (
	evAck coordEventKind = iota + 1
	evDecline
	evTimeout
	evSourceFinished
	evTaskEnded
	evTrigger // a test hook asks for a checkpoint now
)

type coordEvent struct {
	kind   coordEventKind
	id     checkpoint.ID
	task   checkpoint.TaskID
	part   checkpoint.Part
	m      TaskCheckpointStats
	reason string
}

func newCoordLoop(inc *incarnation, co *checkpoint.Coordinator) *coordLoop {
	c := &coordLoop{inc: inc, co: co, wake: newWaker(), held: map[checkpoint.ID][]latEntry{},
		finished: map[checkpoint.TaskID]bool{}, ended: map[checkpoint.TaskID]bool{}, metrics: map[checkpoint.ID][]TaskCheckpointStats{}}
	for _, t := range inc.tasks {
		if t.src != nil || (t.remote != nil && t.ch.source != nil) {
			c.sources = append(c.sources, t)
		}
	}
	c.newClockLedger()
	return c
}

func (c *coordLoop) post(e coordEvent) {
	if c.fwd != nil {
		c.fwd.event(e)
		return
	}
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
	c.wake.ring()
}

func (c *coordLoop) ack(id checkpoint.ID, task checkpoint.TaskID, part checkpoint.Part, m TaskCheckpointStats) {
	c.post(coordEvent{kind: evAck, id: id, task: task, part: part, m: m})
}

func (c *coordLoop) decline(id checkpoint.ID, task checkpoint.TaskID, reason string) {
	c.post(coordEvent{kind: evDecline, id: id, task: task, reason: reason})
}

func (c *coordLoop) sourceFinished(task checkpoint.TaskID) {
	c.post(coordEvent{kind: evSourceFinished, task: task})
}

func (c *coordLoop) taskEnded(task checkpoint.TaskID) {
	c.post(coordEvent{kind: evTaskEnded, task: task})
}

// hold registers rows a transactional sink pre-committed in epoch id: they
// become visible when id (or a later checkpoint) is committed.
func (c *coordLoop) hold(id checkpoint.ID, rows []latEntry) {
	if len(rows) == 0 {
		return
	}
	if c.fwd != nil {
		c.fwd.hold(id, rows)
		return
	}
	c.mu.Lock()
	c.held[id] = append(c.held[id], rows...)
	c.mu.Unlock()
}

func (c *coordLoop) stopTimers() {
	c.mu.Lock()
	for _, t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	c.mu.Unlock()
}

func (c *coordLoop) run() {
	defer c.inc.wg.Done()
	ctx := c.inc.coordCtx
	var tick <-chan time.Time
	if !c.inc.opts.noPeriodic && c.inc.opts.hooks.triggerAfter == nil {
		tk := time.NewTicker(c.inc.opts.settings.CheckpointInterval)
		defer tk.Stop()
		tick = tk.C
	}
	for !c.dead {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-tick:
			if !c.final {
				c.trigger()
			}
		}
		c.mu.Lock()
		evs := c.events
		c.events = nil
		c.mu.Unlock()
		for _, e := range evs {
			if c.dead || ctx.Err() != nil {
				return
			}
			c.handle(e)
		}
		if !c.dead {
			c.maybeFinal()
		}
	}
}

func (c *coordLoop) handle(e coordEvent) {
	now := time.Now()
	switch e.kind {
	case evAck:
		c.metrics[e.id] = append(c.metrics[e.id], e.m)
		c.step(checkpoint.Ack{Now: now, ID: e.id, Task: e.task, Part: e.part})
		c.clockAcked(e.id, e.task)
	case evDecline:
		c.step(checkpoint.Decline{Now: now, ID: e.id, Task: e.task, Reason: e.reason})
	case evTimeout:
		c.step(checkpoint.Timeout{Now: now, ID: e.id})
	case evSourceFinished:
		c.finished[e.task] = true
		if len(c.finished) == len(c.sources) {
			c.final = true
		}
	case evTrigger:
		if !c.final {
			c.trigger()
		}
	case evTaskEnded:
		c.ended[e.task] = true
		if len(c.ended) == len(c.inc.tasks) {
			c.drained = true
		}
	}
}

// maybeFinal ends a bounded run. Once every source is exhausted and no
// checkpoint is pending, the sources end their channels; the end travels
// through every task behind the last records. Once every task has ended,
// nothing is in flight anywhere, and the final checkpoint is taken: every
// task snapshots on the coordinator's word, sinks pre-commit the last
// epoch, and its completion commits it. It is retried if it fails.
func (c *coordLoop) maybeFinal() {
	if !c.final || len(c.co.Pending()) > 0 {
		return
	}
	if !c.endSent {
		c.endSent = true
		for _, t := range c.sources {
			t.post(ctrlMsg{kind: ctrlEnd})
		}
		return
	}
	if c.drained && c.finalID == 0 {
		c.trigger()
	}
}

func (c *coordLoop) trigger() {
	if c.dead {
		return
	}
	c.step(checkpoint.Trigger{Now: time.Now()})
}

// point passes the named coordinator crash point. It returns the failure
// (a *fault.Crash when a fault fires); the caller hands it to fail.
func (c *coordLoop) point(name string) error {
	return c.inc.reach(name, fault.Coordinator, "")
}

// fail ends the loop on err: a *fault.Crash kills the coordinator, any
// other error (a kill=process fault the command cannot carry out) fails
// the job.
func (c *coordLoop) fail(err error) {
	c.dead = true
	c.inc.fail(err, "")
}

func (c *coordLoop) fatal(err error) {
	c.dead = true
	c.inc.settle(outcome{kind: outError, at: time.Now(), err: err})
}

// step feeds one input to the coordinator and carries out its actions.
// exec steps the coordinator again from inside (a metadata write's
// outcome), which voids the slice being walked, so it walks a copy.
func (c *coordLoop) step(in checkpoint.Input) { c.exec(slices.Clone(c.co.Step(in))) }

func (c *coordLoop) exec(actions []checkpoint.Action) {
	ctx := c.inc.coordCtx
	store := c.inc.storeOnce
	for _, a := range actions {
		if c.dead || ctx.Err() != nil {
			c.dead = true
			return
		}
		switch a := a.(type) {
		case checkpoint.InjectBarrier:
			if c.drained {
				c.finalID = a.ID
				for _, t := range c.inc.tasks {
					t.post(ctrlMsg{kind: ctrlFinal, id: a.ID, at: a.At})
				}
			} else if c.clock != nil {
				c.clockTrigger(a.ID, a.At)
			} else {
				for _, t := range c.sources {
					t.post(ctrlMsg{kind: ctrlTrigger, id: a.ID, at: a.At})
				}
				c.stopSources(a.ID)
			}
			c.inc.obs.triggered()
			if err := c.point(PointAfterTrigger); err != nil {
				c.fail(err)
				return
			}
		case checkpoint.ScheduleTimeout:
			id := a.ID
			t := time.AfterFunc(a.After, func() { c.post(coordEvent{kind: evTimeout, id: id}) })
			c.mu.Lock()
			c.timers = append(c.timers, t)
			c.mu.Unlock()
		case checkpoint.WriteMetadata:
			if err := c.point(PointAfterPartsBeforeMetadata); err != nil {
				c.fail(err)
				return
			}
			c.worldSaved(a.ID)
			// Every sink subtask flushed the epoch with its part: the sink's
			// record of the files it covers is made durable before the
			// checkpoint is (see sink.Sink.Record).
			if err := c.inc.env.Sink.Record(int64(a.ID)); err != nil {
				if ctx.Err() != nil {
					c.dead = true
					return
				}
				c.step(checkpoint.MetadataFailed{Now: time.Now(), ID: a.ID, Err: fmt.Errorf("recording the sink's files: %w", err)})
				continue
			}
			st, _ := c.co.Stats(a.ID)
			md := metadata{Version: layoutVersion, Job: c.inc.plan.job.Name, RunID: c.inc.runID, Checkpoint: uint64(a.ID),
				Parallelism: c.inc.plan.parallelism, Barriers: c.inc.mode.String(),
				TriggeredAt: st.Triggered.UTC().Format(time.RFC3339Nano), Replayed: c.inc.replayed}
			for _, p := range a.Parts {
				md.Parts = append(md.Parts, metaPart{Task: string(p.Task), Key: p.Part.Key, StateBytes: p.Part.StateBytes,
					InFlightBytes: p.Part.InFlightBytes, InFlightRecords: p.Part.InFlightRecords})
			}
			data, err := json.Marshal(md)
			if err != nil {
				c.step(checkpoint.MetadataFailed{Now: time.Now(), ID: a.ID, Err: err})
				continue
			}
			if err := c.point(PointMidMetadata); err != nil {
				c.fail(err)
				return
			}
			if err := store.Put(ctx, c.inc.prefix+metadataKey(a.ID), data); err != nil {
				if ctx.Err() != nil {
					c.dead = true
					return
				}
				c.step(checkpoint.MetadataFailed{Now: time.Now(), ID: a.ID, Err: err})
				continue
			}
			if err := c.point(PointAfterMetadata); err != nil {
				c.fail(err)
				return
			}
			c.step(checkpoint.MetadataWritten{Now: time.Now(), ID: a.ID})
		case checkpoint.NotifyComplete:
			c.inc.env.Trace.Record(spacetime.Event{Kind: spacetime.PointComplete, Lane: coordinatorLane, Worker: -1, ID: int64(a.ID)})
			c.inc.forgetCheckpoints(a.ID)
			c.resumeSources(a.ID, true)
			c.clock.logCut(a.ID)
			c.inc.obs.checkpointDone(c.inc.attempt, a.ID == c.finalID, a.Stats, c.take(a.ID))
			if err := c.point(PointSinkBeforeCommit); err != nil {
				c.fail(err)
				return
			}
			if err := c.inc.env.Sink.Commit(int64(a.ID)); err != nil {
				c.fatal(fmt.Errorf("committing epoch %d: %w", a.ID, err))
				return
			}
			visible := time.Now()
			c.mu.Lock()
			for id, rows := range c.held {
				if id <= a.ID {
					c.inc.obs.recordLatency(rows, visible)
					delete(c.held, id)
				}
			}
			c.mu.Unlock()
			if err := c.point(PointSinkAfterCommit); err != nil {
				c.fail(err)
				return
			}
			if a.ID == c.finalID {
				// Done once the rest of these actions (retention) ran.
				defer func() {
					c.dead = true
					c.inc.settle(outcome{kind: outDone, at: time.Now()})
				}()
			}
		case checkpoint.Abort:
			if tr := c.inc.env.Trace; tr != nil {
				tr.Record(spacetime.Event{Kind: spacetime.PointFailed, Lane: coordinatorLane, Worker: -1, ID: int64(a.ID),
					Note: abortNote(a)})
			}
			c.inc.abandon(a.ID)
			c.resumeSources(a.ID, false)
			c.inc.obs.checkpointDone(c.inc.attempt, a.ID == c.finalID, a.Stats, c.take(a.ID))
			for _, t := range c.inc.tasks {
				t.post(ctrlMsg{kind: ctrlAbort, id: a.ID})
			}
			if err := c.inc.patient.Err(); err != nil {
				c.fatal(fmt.Errorf("checkpoint %d failed: %w", a.ID, err))
				return
			}
			if a.ID == c.finalID {
				c.finalID = 0
				// While storage does not answer, the outage limit above
				// bounds the retries, not this count.
				if c.inc.patient.Outage() > 0 {
					continue
				}
				if c.finalErr++; c.finalErr >= maxFinalAttempts {
					c.fatal(fmt.Errorf("the final checkpoint failed %d times in a row, last: %s %s", c.finalErr, a.Reason, a.Detail))
					return
				}
			}
		case checkpoint.DiscardParts:
			if err := deleteCheckpoint(ctx, store, c.inc.prefix, a.ID); err != nil && ctx.Err() == nil {
				c.inc.obs.note(fmt.Sprintf("could not discard checkpoint %d: %v", a.ID, err))
			}
		case checkpoint.DeleteOld:
			for _, id := range a.IDs {
				if err := deleteCheckpoint(ctx, store, c.inc.prefix, id); err != nil && ctx.Err() == nil {
					c.inc.obs.note(fmt.Sprintf("could not delete old checkpoint %d: %v", id, err))
				}
			}
		case checkpoint.TriggerSkipped:
			c.inc.obs.skipped()
		case checkpoint.Fail:
			c.fatal(a.Err)
			return
		}
	}
}

// take returns and forgets the task metrics of checkpoint id, in task
// order.
func (c *coordLoop) take(id checkpoint.ID) []TaskCheckpointStats {
	m := c.metrics[id]
	delete(c.metrics, id)
	slices.SortFunc(m, func(a, b TaskCheckpointStats) int {
		switch {
		case a.Task < b.Task:
			return -1
		case a.Task > b.Task:
			return 1
		}
		return 0
	})
	return m
}

// pending are the checkpoints in progress (failed when the incarnation
// dies).
func (c *coordLoop) pending() []checkpoint.ID { return c.co.Pending() }
