package microbatch

import (
	"fmt"
	"time"
)

// State is a named state of the protocol.
type State int

const (
	// Idle waits for the trigger.
	Idle State = iota
	// Planning decides the end position of every source partition.
	Planning
	// LoggingOffsets writes offsets/N (write-ahead).
	LoggingOffsets
	// Running runs the finite job over [start, end).
	Running
	// Sealing writes state version N and hands batch N to the sink with
	// its batch id, concurrently.
	Sealing
	// LoggingCommit writes commits/N.
	LoggingCommit
	// PlanningAhead plans batch N+1 while batch N, sealed, waits for its
	// commit entry: the next trigger was due when N was sealed.
	PlanningAhead
	// LoggingAhead writes commits/N and offsets/N+1 at the same time.
	LoggingAhead
	// Publishing makes batch N visible (transactional sink), records its
	// latency and applies retention. The batch is committed.
	Publishing
	// Rebuilding replaces lost workers.
	Rebuilding
	// Finished: the bounded input is consumed and committed.
	Finished
)

var stateNames = [...]string{"idle", "planning", "logging-offsets", "running", "sealing",
	"logging-commit", "planning-ahead", "logging-ahead", "publishing", "rebuilding", "finished"}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Event is an input of the machine: something that happened. The set is
// closed; each event prints as one line.
type Event interface {
	isEvent()
	String() string
}

// Started is the first event: where a fresh coordinator resumes
// (RestartPlan).
type Started struct {
	Now time.Time
	// LastCommitted is the newest committed batch (-1 none).
	LastCommitted int64
	// Rerun is the logged, uncommitted batch to run again, or -1.
	Rerun int64
}

// Tick: the trigger interval has elapsed.
type Tick struct{ Now time.Time }

// Planned: batch N's end positions are decided. Empty means there is
// nothing to do (no new input, watermark unchanged); Done means the bounded
// input is consumed and committed, so the run is complete.
type Planned struct {
	Empty, Done bool
}

// OffsetsLogged: offsets/N is durable.
type OffsetsLogged struct{}

// RunDone: every worker ran batch N to the end and flushed its operators.
type RunDone struct{}

// StateCommitted: state version N is complete. Now is when (zero: never
// plan ahead).
type StateCommitted struct{ Now time.Time }

// SinkDone: every sink subtask flushed batch N. Now is when (zero: never
// plan ahead).
type SinkDone struct{ Now time.Time }

// CommitLogged: commits/N is durable.
type CommitLogged struct{}

// Published: batch N is visible and accounted; Stop asks the machine to
// finish (a batch limit was reached).
type Published struct{ Stop bool }

// WorkerLost: one or more workers died. Their memory is gone. Finished
// are the events of actions that completed before the loss could be
// reported (the I/O loop waits for actions in flight first); the machine
// takes note of what they made durable, without acting on them.
type WorkerLost struct {
	Now      time.Time
	Finished []Event
}

// Rebuilt: the lost workers have been replaced.
type Rebuilt struct{ Now time.Time }

func (Started) isEvent()        {}
func (Tick) isEvent()           {}
func (Planned) isEvent()        {}
func (OffsetsLogged) isEvent()  {}
func (RunDone) isEvent()        {}
func (StateCommitted) isEvent() {}
func (SinkDone) isEvent()       {}
func (CommitLogged) isEvent()   {}
func (Published) isEvent()      {}
func (WorkerLost) isEvent()     {}
func (Rebuilt) isEvent()        {}

// Action is an output of the machine, executed by the I/O loop in order.
// The set is closed; each action prints as one line.
type Action interface {
	isAction()
	String() string
}

// WaitUntil: wait until At (or a worker is lost), then feed Tick.
type WaitUntil struct{ At time.Time }

// Point: call the named crash point (as the coordinator). Produces no
// event; a crash there ends this coordinator.
type Point struct{ Name string }

// Plan: decide the end positions of batch Batch. Feeds Planned. Ahead:
// the batch before it is sealed and not yet committed, so the plan starts
// where that batch ends.
type Plan struct {
	Batch int64
	Ahead bool
}

// LogOffsets: write offsets/Batch. Feeds OffsetsLogged.
type LogOffsets struct{ Batch int64 }

// Run: run batch Batch on the workers. Rerun is set when the batch runs
// again with the logged positions (after a crash). Feeds RunDone.
type Run struct {
	Batch int64
	Rerun bool
}

// FlushSink: hand batch Batch to the sink. Feeds SinkDone. It comes
// together with CommitState, and the two run concurrently: the I/O loop
// starts both and feeds SinkDone and StateCommitted as each finishes.
type FlushSink struct{ Batch int64 }

// CommitState: write state version Batch. Feeds StateCommitted. Runs
// concurrently with FlushSink.
type CommitState struct{ Batch int64 }

// LogCommit: write commits/Batch. Feeds CommitLogged. After PlanningAhead
// it comes with the LogOffsets of the next batch, and the two run
// concurrently.
type LogCommit struct{ Batch int64 }

// Publish: commit batch Batch at a transactional sink, record latency and
// progress, release input up to its end, apply retention. Feeds Published.
type Publish struct{ Batch int64 }

// Rebuild: replace every dead worker. The I/O loop first waits for the
// actions still in flight (a concurrent state write or sink flush). Rollback is set when the surviving
// workers' operators have seen input of an uncommitted batch and must be
// restored to the state after LastCommitted too (and the sink recovered to
// it). Failed names the logged batch that will run again (-1 none);
// Discarded names a plan dropped before its offsets were durable (-1 none).
// Ahead names a batch planned and logged ahead that is kept: it runs after
// the publish of LastCommitted (-1: none; a plan made ahead is dropped).
// Feeds Rebuilt.
type Rebuild struct {
	Rollback      bool
	LastCommitted int64
	Failed        int64
	Discarded     int64
	Ahead         int64
}

// Finish: the run is complete.
type Finish struct{}

// Fail: the machine refused an event that cannot happen in its state (a
// bug in the driver or in the machine). The driver stops and returns Err.
type Fail struct{ Err error }

func (WaitUntil) isAction()   {}
func (Point) isAction()       {}
func (Plan) isAction()        {}
func (LogOffsets) isAction()  {}
func (Run) isAction()         {}
func (CommitState) isAction() {}
func (FlushSink) isAction()   {}
func (LogCommit) isAction()   {}
func (Publish) isAction()     {}
func (Rebuild) isAction()     {}
func (Finish) isAction()      {}
func (Fail) isAction()        {}

// Machine is the commit protocol of one coordinator incarnation: events
// in through Step, actions out. The package doc draws its states and
// outlines the loop that drives it.
type Machine struct {
	state     State
	batch     int64 // the batch being planned or processed
	committed int64 // newest committed batch, -1 none
	trigger   time.Duration
	nextTick  time.Time
	// tickAt is when the newest trigger fired, where an idle wait of a
	// trigger of 0 counts from (IdlePoll).
	tickAt time.Time
	// offsetsDurable: offsets/batch is logged.
	offsetsDurable bool
	// stateDone, sinkDone: what of Sealing has finished.
	stateDone, sinkDone bool
	// ahead: batch+1 is planned (or being planned) before batch is
	// published; nextLogged: its offsets entry is durable; aheadTick: the
	// next trigger after that plan; dueTick: the trigger it consumed, due
	// again if the plan is dropped.
	ahead, nextLogged  bool
	aheadTick, dueTick time.Time
	// resume is the state to go back to after a rebuild.
	resume State
	// lateOffsets is the deliberately broken variant used by a test: the
	// offsets entry is written after the batch has run and reached the
	// sink, instead of before any work.
	lateOffsets bool
	// noAhead never plans ahead (benchmarks compare against it).
	noAhead bool
	// out is the buffer Step returns, reused by the next Step.
	out []Action
}

// IdlePoll is how long a machine with a trigger of 0 waits after a plan
// found nothing to do. A trigger of 0 runs batches back to back, each
// planned as soon as the one before it is sealed (as Spark does without
// a trigger); with no new input that would plan empty batches in a busy
// loop, so the source is polled at this interval instead.
const IdlePoll = 10 * time.Millisecond

// idleUntil is when an empty plan's wait ends: the next trigger, or with
// a trigger of 0 one IdlePoll after the trigger that planned it.
func (m *Machine) idleUntil() time.Time {
	if m.trigger > 0 {
		return m.nextTick
	}
	return m.tickAt.Add(IdlePoll)
}

// NewMachine returns a machine in Idle waiting for Started. A trigger of
// 0 runs batches back to back (IdlePoll).
func NewMachine(trigger time.Duration) *Machine {
	return &Machine{state: Idle, committed: -1, batch: -1, trigger: trigger}
}

// State returns the current state.
func (m *Machine) State() State { return m.state }

// Batch returns the batch being planned or processed.
func (m *Machine) Batch() int64 { return m.batch }

// Committed returns the newest committed batch (-1 none).
func (m *Machine) Committed() int64 { return m.committed }

// OffsetsDurable reports whether the current batch's offsets are logged.
func (m *Machine) OffsetsDurable() bool { return m.offsetsDurable }

// Step feeds one event and returns the actions to execute, in order. The
// slice is the machine's own buffer: it is valid until the next Step, and
// a driver that keeps actions longer copies them. An event that cannot
// happen in the current state is refused with a single Fail action and
// leaves the state as it was; the driver stops on it.
func (m *Machine) Step(ev Event) []Action {
	clear(m.out)
	m.out = m.out[:0]
	if acts := m.step(ev); len(acts) > 0 {
		return acts
	}
	return nil
}

// emit appends actions to the machine's buffer and returns it.
func (m *Machine) emit(as ...Action) []Action {
	m.out = append(m.out, as...)
	return m.out
}

// refuse answers an event that cannot happen in the current state.
func (m *Machine) refuse(ev Event) []Action {
	return m.emit(Fail{Err: fmt.Errorf("microbatch protocol: event %s in state %s (batch %d)", ev, m.state, m.batch)})
}

func (m *Machine) step(ev Event) []Action {
	if e, lost := ev.(WorkerLost); lost {
		return m.workerLost(e)
	}
	switch e := ev.(type) {
	case Started:
		if m.batch != -1 {
			return m.refuse(ev)
		}
		if e.Rerun >= 0 && e.Rerun != e.LastCommitted+1 {
			return m.emit(Fail{Err: fmt.Errorf("microbatch protocol: rerun of batch %d after committed batch %d", e.Rerun, e.LastCommitted)})
		}
		m.committed = e.LastCommitted
		m.nextTick = e.Now
		if e.Rerun >= 0 {
			m.batch = e.Rerun
			m.offsetsDurable = true
			m.state = Running
			return m.emit(Point{PointAfterOffsets}, Run{Batch: m.batch, Rerun: true})
		}
		m.batch = e.LastCommitted + 1
		m.state = Idle
		return m.emit(WaitUntil{At: e.Now})
	case Tick:
		if m.state != Idle {
			return m.refuse(ev)
		}
		m.nextTick, m.tickAt = e.Now.Add(m.trigger), e.Now
		m.state = Planning
		return m.emit(Plan{Batch: m.batch})
	case Planned:
		if m.state == PlanningAhead {
			if e.Empty || e.Done {
				// Nothing to run ahead: commit as usual; the next trigger
				// (already due) plans again once the batch is published.
				m.ahead = false
				m.state = LoggingCommit
				return m.emit(LogCommit{m.batch})
			}
			m.nextTick = m.aheadTick
			m.state = LoggingAhead
			return m.emit(Point{PointBeforeOffsets}, LogCommit{m.batch}, LogOffsets{m.batch + 1})
		}
		if m.state != Planning {
			return m.refuse(ev)
		}
		switch {
		case e.Done:
			m.state = Finished
			return m.emit(Finish{})
		case e.Empty:
			m.state = Idle
			return m.emit(WaitUntil{At: m.idleUntil()})
		case m.lateOffsets:
			m.state = Running
			return m.emit(Run{Batch: m.batch})
		}
		m.state = LoggingOffsets
		return m.emit(Point{PointBeforeOffsets}, LogOffsets{m.batch})
	case OffsetsLogged:
		if m.state == LoggingAhead {
			m.nextLogged = true
			return nil
		}
		if m.state != LoggingOffsets {
			return m.refuse(ev)
		}
		m.offsetsDurable = true
		if m.lateOffsets {
			m.state = LoggingCommit
			return m.emit(Point{PointAfterOffsets}, LogCommit{m.batch})
		}
		m.state = Running
		return m.emit(Point{PointAfterOffsets}, Run{Batch: m.batch})
	case RunDone:
		if m.state != Running {
			return m.refuse(ev)
		}
		m.state = Sealing
		m.stateDone, m.sinkDone = false, false
		return m.emit(FlushSink{m.batch}, CommitState{m.batch})
	case StateCommitted:
		if m.state != Sealing || m.stateDone {
			return m.refuse(ev)
		}
		m.stateDone = true
		return m.sealed(PointAfterState, e.Now)
	case SinkDone:
		if m.state != Sealing || m.sinkDone {
			return m.refuse(ev)
		}
		m.sinkDone = true
		return m.sealed(PointAfterSink, e.Now)
	case CommitLogged:
		if m.state != LoggingCommit && m.state != LoggingAhead {
			return m.refuse(ev)
		}
		m.committed = m.batch
		m.state = Publishing
		return m.emit(Point{PointAfterCommit}, Publish{m.batch})
	case Published:
		if m.state != Publishing {
			return m.refuse(ev)
		}
		m.batch++
		m.offsetsDurable = false
		if e.Stop {
			m.state = Finished
			return m.emit(Finish{})
		}
		if m.ahead {
			m.ahead = false
			if m.nextLogged {
				m.nextLogged = false
				m.offsetsDurable = true
				m.state = Running
				return m.emit(Point{PointAfterOffsets}, Run{Batch: m.batch})
			}
			// offsets/N+1 is still being written.
			m.state = LoggingOffsets
			return nil
		}
		m.state = Idle
		return m.emit(WaitUntil{At: m.nextTick})
	case Rebuilt:
		if m.state != Rebuilding {
			return m.refuse(ev)
		}
		m.state = m.resume
		switch m.resume {
		case Publishing:
			return m.emit(Publish{m.batch})
		case Running:
			return m.emit(Run{Batch: m.batch, Rerun: true})
		}
		m.state = Idle
		return m.emit(WaitUntil{At: e.Now})
	}
	return m.refuse(ev)
}

// sealed passes the crash point of the half of Sealing that finished and,
// once both halves have, moves on to the commit log (the late variant: to
// the offsets log), planning the next batch first if its trigger is due.
func (m *Machine) sealed(point string, now time.Time) []Action {
	acts := m.emit(Point{point})
	if !m.stateDone || !m.sinkDone {
		return acts
	}
	if m.lateOffsets {
		m.state = LoggingOffsets
		return m.emit(Point{PointBeforeOffsets}, LogOffsets{m.batch})
	}
	if !m.noAhead && !now.IsZero() && !now.Before(m.nextTick) {
		m.ahead, m.nextLogged = true, false
		m.aheadTick, m.dueTick = now.Add(m.trigger), m.nextTick
		m.state = PlanningAhead
		return m.emit(Plan{Batch: m.batch + 1, Ahead: true})
	}
	m.state = LoggingCommit
	return m.emit(LogCommit{m.batch})
}

// workerLost decides what a lost worker costs in the current state.
func (m *Machine) workerLost(e WorkerLost) []Action {
	// What finished before the loss was reported is durable.
	for _, f := range e.Finished {
		switch f.(type) {
		case CommitLogged:
			if m.state == LoggingCommit || m.state == LoggingAhead {
				m.committed = m.batch
				m.state = Publishing
			}
		case OffsetsLogged:
			switch {
			case m.state == LoggingAhead || m.state == Publishing && m.ahead:
				m.nextLogged = true
			case m.state == LoggingOffsets:
				m.offsetsDurable = true
			}
		}
	}
	switch m.state {
	case Finished:
		return nil
	case Rebuilding:
		// The pending Rebuild replaces every worker dead by the time it runs.
		return nil
	case Publishing:
		// Batch N is committed: only the dead worker is rebuilt, from
		// state version N, and the publish is repeated (it is idempotent).
		// A next batch logged ahead runs after it; one not logged is
		// dropped.
		r := Rebuild{LastCommitted: m.committed, Failed: -1, Discarded: -1, Ahead: -1}
		if m.ahead {
			if m.nextLogged {
				r.Ahead = m.batch + 1
			} else {
				r.Discarded = m.batch + 1
				m.ahead = false
				m.nextTick = m.dueTick
			}
		}
		m.resume = Publishing
		m.state = Rebuilding
		return m.emit(r)
	}
	// A plan made ahead of an uncommitted batch is dropped: no work on it
	// began, and batch N runs again first.
	if m.ahead {
		m.ahead, m.nextLogged = false, false
		m.nextTick = m.dueTick
	}
	// Has any operator seen input of the uncommitted batch?
	touched := false
	switch m.state {
	case Running, Sealing, LoggingCommit, PlanningAhead, LoggingAhead:
		touched = true
	case LoggingOffsets:
		touched = m.lateOffsets // the late variant has run the batch already
	}
	r := Rebuild{Rollback: touched, LastCommitted: m.committed, Failed: -1, Discarded: -1, Ahead: -1}
	if m.offsetsDurable {
		// The batch is logged: it runs again with exactly its positions.
		r.Failed = m.batch
		m.resume = Running
	} else {
		if m.state != Idle && m.state != Planning {
			r.Discarded = m.batch
		}
		m.resume = Idle
	}
	m.state = Rebuilding
	return m.emit(r)
}
