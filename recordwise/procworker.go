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
	"sync/atomic"

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
	mesh  *wire.Mesh // direct links to the other workers
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
	mesh     *wire.Mesh
	peers    []string     // every worker's mesh address, for this attempt
	linked   atomic.Int64 // rows received over direct links this attempt
	sends    []sideLink
	receives []sideLink
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
	if pw.mesh, err = run.OpenMesh(c, w); err != nil {
		pw.env.Close()
		_ = run.SendFailed(c, err)
		return err
	}
	defer pw.mesh.Close() // after the attempt's stop, below
	pw.conn = c
	pw.points = newPointAsker(c, cfg.AskPoints)
	pw.sink = &procSink{mode: cfg.SinkMode, conn: c, alloc: w.Alloc, schema: pw.plan.job.Output.Schema, waiting: map[uint32]chan error{}}
	pw.env.Sink = pw.sink
	defer pw.env.Close()
	defer func() { pw.stopAttempt(-1) }()
	if pw.env.Trace != nil {
		stop := pw.forwardTrace()
		defer stop()
	}
	if err := run.SendReadyAt(c, pw.mesh.Addr()); err != nil {
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
			linked := pw.stopAttempt(m.Attempt)
			_ = sendMsg(c, procMsg{Op: opStopped, Attempt: m.Attempt, Linked: linked})
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
		side: &workerSide{id: pw.id, n: pw.cfg.Workers, conn: pw.conn, points: pw.points, mesh: pw.mesh, peers: st.Peers}}
	inc.contexts(ctx)
	defer func() {
		if err != nil {
			inc.stop()
			inc.teardown()
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
// every goroutine stops, and what its tasks held is released. It returns
// the rows the attempt received from other workers' tasks.
func (pw *procWorker) stopAttempt(attempt int) int64 {
	inc := pw.inc
	if inc == nil || (attempt >= 0 && inc.attempt != attempt) {
		return 0
	}
	inc.stop()
	inc.teardown()
	pw.inc, pw.tasks = nil, nil
	return inc.side.linked.Load()
}

// startSide starts the pumps of the links to and from tasks of other
// worker processes (with the tasks, in start). Each pump first finds the
// direct connection to the peer its link goes to (wire.Mesh; the lower
// id dials), then opens its end of the link's data channel on it: the
// receiver first grants credit, and the sender sends nothing before it
// has some, so the two ends may open in either order. Finding a peer
// waits, so it happens here, off the control loop that must stay free to
// hear a stop.
func (inc *incarnation) startSide() {
	s := inc.side
	for _, l := range s.receives {
		peer := workerOf(l.link.fromSub, s.n)
		inc.wg.Add(1)
		go func() {
			defer inc.wg.Done()
			c, err := s.peer(inc.ctx, peer)
			if err != nil {
				s.linkBroke(inc, l.link, peer, nil, err)
				return
			}
			rx, err := c.OpenReceiver(linkChannel(inc.attempt, l.link), l.link.from.schema, inc.opts.channelBuffers)
			if err != nil {
				s.linkBroke(inc, l.link, peer, c, err)
				return
			}
			defer rx.Close()
			r := &linkReceiver{q: l.q, wake: l.wake, rx: rx, rows: &s.linked}
			if err := r.run(inc.ctx); err != nil {
				s.linkBroke(inc, l.link, peer, c, err)
			}
		}()
	}
	for _, l := range s.sends {
		peer := workerOf(l.link.toSub, s.n)
		inc.wg.Add(1)
		go func() {
			defer inc.wg.Done()
			c, err := s.peer(inc.ctx, peer)
			if err != nil {
				s.linkBroke(inc, l.link, peer, nil, err)
				return
			}
			tx, err := c.OpenSender(linkChannel(inc.attempt, l.link), l.link.from.schema, inc.env.Alloc)
			if err != nil {
				s.linkBroke(inc, l.link, peer, c, err)
				return
			}
			snd := &linkSender{q: l.q, wake: l.wake, tx: tx}
			err = snd.run(inc.ctx)
			if err != nil {
				tx.Abandon() // a link cut short has no end
				s.linkBroke(inc, l.link, peer, c, err)
			}
		}()
	}
}

// peer is the direct connection to worker w of this attempt.
func (s *workerSide) peer(ctx context.Context, w int) (*wire.Conn, error) {
	if w < 0 || w >= len(s.peers) || s.peers[w] == "" {
		return nil, fmt.Errorf("the coordinator gave no address for worker %d", w)
	}
	return s.mesh.Peer(ctx, w, s.peers[w])
}

// linkBroke handles a link that ended with err. A stopped attempt is no
// failure. A broken connection to the peer is its death, or soon will
// be: the coordinator hears it from its own connection to the peer and
// ends the attempt as a crash, so this worker only tells it (opPeerLost,
// for a link that broke while the peer still answers its coordinator)
// and lets the link's tasks wait for the stop. Anything else, a peer
// sending what is no link's stream, fails the run.
func (s *workerSide) linkBroke(inc *incarnation, l link, peer int, c *wire.Conn, err error) {
	if inc.ctx.Err() != nil {
		return
	}
	if c == nil || c.Err() != nil {
		addr := ""
		if peer < len(s.peers) {
			addr = s.peers[peer]
		}
		_ = sendMsg(s.conn, procMsg{Op: opPeerLost, Attempt: inc.attempt, Subtask: peer, Text: addr, Why: err.Error()})
		return
	}
	inc.fail(fmt.Errorf("channel %s: %w", l.name(), err), "")
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
