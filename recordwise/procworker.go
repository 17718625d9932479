package recordwise

// This file runs a worker process's tasks (--workers process): on each
// attempt's start it builds the tasks placed on it from durable storage
// and the inputs alone, as a simulated worker's are built, with every
// channel to a task of another process a wire link (wirelink.go); what the
// tasks tell their coordinator (acks, held rows, measurements) goes over
// the control channel, and their sink writers write through the
// coordinator (procsink.go). The attempt ends when the coordinator says
// stop, or with the process.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// procWorker is what a recordwise worker process holds: its
// configuration, inputs, durable storage and plan, and the attempt it
// runs. The attempt's tasks are memory that dies with this process.
type procWorker struct {
	cfg   procConfig
	id    int
	env   *run.Env
	plan  *plan
	mode  barrier.Mode
	opts  *options
	alloc memory.Allocator
	conn  *wire.Conn
	sink  *procSink

	inc    *incarnation
	tasks  map[string]*task
	points *pointAsker
}

// workerSide is an incarnation's part in a worker process: which worker
// of how many it is, its connection, and the links to and from tasks of
// other processes.
type workerSide struct {
	id, n    int
	conn     *wire.Conn
	points   *pointAsker
	sends    []sideLink
	receives []sideLink
	tx       []*wire.Sender
	rx       []*wire.Receiver
}

// sideLink is one end of a link in this process: the local queue and the
// waker of the pump at its far end.
type sideLink struct {
	link link
	q    *queue
	wake waker
}

// runsHere says subtask sub runs in this process: always, but in a
// worker process only the subtasks placed on it.
func (inc *incarnation) runsHere(sub int) bool {
	return inc.side == nil || workerOf(sub, inc.side.n) == inc.side.id
}

// ServeWorker implements run.ProcessWorker: a recordwise worker process.
// It opens what its configuration names and says ready (or failed, with
// the reason), then runs the attempts its coordinator starts. It returns
// when the connection closes.
func (Executor) ServeWorker(ctx context.Context, c *wire.Conn, config json.RawMessage, w run.WorkerEnv) error {
	var cfg procConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("recordwise worker: the configuration is not one: %w", err)
	}
	pw, err := startWorkerSide(ctx, cfg, w)
	if err != nil {
		err = fmt.Errorf("recordwise worker %d: %w", w.ID, err)
		// The fleet hears the reason even if this process exits at once
		// (run.Fleet's awaitReady).
		_ = run.SendFailed(c, err)
		return err
	}
	pw.conn = c
	pw.points = newPointAsker(c, cfg.AskPoints)
	pw.sink = &procSink{mode: cfg.SinkMode, conn: c, alloc: w.Alloc, schema: pw.plan.job.Output.Schema, waiting: map[uint32]chan error{}}
	pw.env.Sink = pw.sink
	defer pw.env.Close()
	defer pw.stopAttempt(-1)
	if pw.env.Trace != nil {
		stop := pw.forwardTrace()
		defer stop()
	}
	if err := run.SendReady(c); err != nil {
		return nil // the coordinator is gone already
	}
	for {
		b, err := c.Control(ctx)
		if err != nil {
			return nil // the run is over, or the coordinator is gone
		}
		m, err := decodeMsg(b)
		if err != nil {
			_ = sendMsg(c, procMsg{Op: opError, Text: fmt.Sprintf("recordwise worker %d: %v", w.ID, err)})
			continue
		}
		switch m.Op {
		case opStart:
			pw.stopAttempt(-1)
			if err := pw.startAttempt(ctx, m); err != nil {
				_ = sendMsg(c, procMsg{Op: opFailed, Attempt: m.Attempt, Text: fmt.Sprintf("worker %d: %v", w.ID, err)})
			}
		case opCtrl:
			if t := pw.tasks[m.Task]; t != nil && pw.inc.attempt == m.Attempt {
				t.post(ctrlMsg{kind: m.Ctrl, id: checkpoint.ID(m.ID), at: fromNanos(m.At)})
			}
		case opStop:
			pw.stopAttempt(m.Attempt)
			_ = sendMsg(c, procMsg{Op: opStopped, Attempt: m.Attempt})
		case opFlushed:
			pw.sink.flushed(m)
		case opPointAnswer:
			pw.points.answered(m)
		default:
			_ = sendMsg(c, procMsg{Op: opError, Text: fmt.Sprintf("recordwise worker %d: unknown request %q", w.ID, m.Op)})
		}
	}
}

// startAttempt builds and starts the tasks of attempt m.Attempt placed on
// this worker.
func (pw *procWorker) startAttempt(ctx context.Context, m procMsg) (err error) {
	if m.Start == nil {
		return fmt.Errorf("attempt %d: a start without what to start from", m.Attempt)
	}
	st := m.Start
	sh := &shared{env: pw.env, opts: pw.opts, plan: pw.plan, mode: pw.mode, runID: pw.cfg.RunID,
		prefix: runPrefix(pw.plan.job.Name, pw.cfg.RunID), obs: newObserver(nil), patient: pw.env.PatientStore()}
	sh.storeOnce = sh.patient.Once()
	attempt := m.Attempt
	sh.obs.fwd = func(o obsMsg) { _ = sendMsg(pw.conn, procMsg{Op: opObs, Attempt: attempt, Obs: &o}) }
	inc := &incarnation{shared: sh, attempt: attempt, done: make(chan struct{}),
		side: &workerSide{id: pw.id, n: pw.cfg.Workers, conn: pw.conn, points: pw.points}}
	inc.contexts(ctx)
	defer func() {
		if err != nil {
			inc.stop()
			inc.teardown()
			inc.closeSide()
		}
	}()
	pw.sink.begin(inc.ctx, attempt)
	rp := &restoredPoint{}
	if st.From > 0 {
		if rp, err = inc.load(inc.ctx, checkpoint.ID(st.From)); err != nil {
			return fmt.Errorf("restoring recovery point %d: %w", st.From, err)
		}
		inc.from = rp.id
	}
	defer rp.release()
	inc.firstEpoch, inc.replayed = st.FirstEpoch, st.Replayed
	if st.Published != nil {
		if inc.published, err = newPublishedRows(pw.env.Job.Output, st.Published); err != nil {
			return err
		}
	}
	pw.followSchedules(st.Pace)
	pw.env.Trace.SeedReads(st.Reads)
	if err := inc.build(rp); err != nil {
		return err
	}
	inc.coord = newCoordLoop(inc, nil)
	inc.coord.fwd = workerForward{pw.conn, attempt, pw.env.Trace}
	if err := inc.openSide(); err != nil {
		return err
	}
	pw.inc = inc
	pw.tasks = map[string]*task{}
	for _, t := range inc.tasks {
		pw.tasks[string(t.id)] = t
	}
	inc.start()
	go func() { // a task's failure fails the run at the coordinator
		<-inc.done
		if o := inc.outcome; o.kind == outError && inc.ctx.Err() == nil {
			_ = sendMsg(pw.conn, procMsg{Op: opFailed, Attempt: attempt, Text: o.err.Error()})
		}
	}()
	return nil
}

// followSchedules makes this process's readers of paced partitions keep
// the coordinator's schedules (procStart.Pace), before they open.
func (pw *procWorker) followSchedules(pace map[string]source.Schedule) {
	for _, c := range pw.plan.chains {
		if c.source == nil {
			continue
		}
		src := pw.env.Sources[c.source.Input]
		for k, name := range src.Partitions() {
			if sc, ok := pace[c.source.Input+"/"+name]; ok {
				source.FollowSchedule(src, k, sc)
			}
		}
	}
}

// stopAttempt ends the running attempt (only attempt, unless it is -1):
// every goroutine stops, and what its tasks held is released.
func (pw *procWorker) stopAttempt(attempt int) {
	inc := pw.inc
	if inc == nil || (attempt >= 0 && inc.attempt != attempt) {
		return
	}
	inc.stop()
	inc.teardown()
	inc.closeSide()
	pw.inc, pw.tasks = nil, nil
}

// openSide opens the wire ends of the links to and from other processes.
func (inc *incarnation) openSide() error {
	s := inc.side
	for _, l := range s.receives {
		rx, err := s.conn.OpenReceiver(linkChannel(inc.attempt, l.link), l.link.from.schema, inc.opts.channelBuffers)
		if err != nil {
			return err
		}
		s.rx = append(s.rx, rx)
	}
	for _, l := range s.sends {
		tx, err := s.conn.OpenSender(linkChannel(inc.attempt, l.link), l.link.from.schema, inc.env.Alloc)
		if err != nil {
			return err
		}
		s.tx = append(s.tx, tx)
	}
	return nil
}

// startSide starts the pumps of the links (with the tasks, in start).
func (inc *incarnation) startSide() {
	s := inc.side
	for i, l := range s.receives {
		r := &linkReceiver{q: l.q, wake: l.wake, rx: s.rx[i]}
		inc.wg.Add(1)
		go func() {
			defer inc.wg.Done()
			if err := r.run(inc.ctx); err != nil && inc.ctx.Err() == nil {
				inc.fail(fmt.Errorf("channel %s: %w", l.link.name(), err), "")
			}
		}()
	}
	for i, l := range s.sends {
		snd := &linkSender{q: l.q, wake: l.wake, tx: s.tx[i]}
		inc.wg.Add(1)
		go func() {
			defer inc.wg.Done()
			if err := snd.run(inc.ctx); err != nil && inc.ctx.Err() == nil {
				inc.fail(fmt.Errorf("channel %s: %w", l.link.name(), err), "")
			}
		}()
	}
}

// closeSide releases the links' wire ends, after stop.
func (inc *incarnation) closeSide() {
	s := inc.side
	if s == nil {
		return
	}
	for _, rx := range s.rx {
		rx.Close()
	}
	for _, tx := range s.tx {
		tx.Abandon() // a link cut short has no end
	}
	s.rx, s.tx = nil, nil
}

// workerForward takes a worker's task events to its coordinator.
type workerForward struct {
	c       *wire.Conn
	attempt int
	tr      *spacetime.Recorder
}

func (f workerForward) event(e coordEvent) {
	// What the task drew (its snapshot) reaches the diagram before the
	// ack that completes a point.
	sendTrace(f.c, f.tr)
	_ = sendMsg(f.c, procMsg{Op: opEvent, Attempt: f.attempt, Event: toProcEvent(e)})
}

func (f workerForward) hold(id checkpoint.ID, rows []latEntry) {
	_ = sendMsg(f.c, procMsg{Op: opHold, Attempt: f.attempt, ID: uint64(id), Rows: wireLat(rows)})
}
