package recordwise

// This file is the coordinator's side of a run with worker processes
// (--workers process). The run's fleet of worker processes lives as long
// as the run; each attempt (incarnation) is started on all of them with
// what to restore, and stopped on all of them before the next one is
// built, so no task of an old attempt runs beside a new one. In the
// coordinator an attempt's tasks are stubs: their control messages go to
// the task's worker process, and what the worker's tasks send back is
// handed to this process's checkpoint coordinator and observer. Links
// between two worker processes go straight from one to the other (each
// attempt's start carries every worker's mesh address, run.Fleet.Peers);
// only the sink's rows come here, where the sink is.
//
// A worker process whose connection breaks is a dead worker: the attempt
// ends as a crash, the dead process is replaced (its acquire measured,
// fork to ready) and the next attempt restores from the last complete
// checkpoint, as recordwise's global restart does for a simulated worker.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// stopGrace is how long a worker process has to stop an attempt before it
// is killed.
const stopGrace = 5 * time.Second

// procCoord is a run's worker processes as its coordinator drives them.
type procCoord struct {
	sh    *shared
	fleet *run.Fleet
	n     int

	mu  sync.Mutex
	cur *incarnation // the attempt running, nil between two
	// series are the running attempt's readers as the run over time sees
	// them, by input/partition: the workers' reads, reported here.
	series map[string]*report.SeriesReader
	// stopped[w] receives the attempts worker w stopped.
	stopped []chan int
	// linked counts the rows that went straight from one worker process
	// to another, as the workers report them when an attempt stops.
	linked atomic.Int64
}

// note is what the summary says of the worker processes' links.
func (pc *procCoord) note() string {
	return fmt.Sprintf("links between worker processes are direct (each worker listens for its peers, with the run's token): %d rows went from one worker to another without the coordinator, which received only the sink's rows; a killed worker's own count is lost with it", pc.linked.Load())
}

// startProcCoord starts the run's worker processes.
func startProcCoord(ctx context.Context, sh *shared) (*procCoord, error) {
	n := sh.plan.parallelism
	fleet, err := startWorkerProcesses(ctx, sh.env, sh.opts, sh.plan, sh.runID, n)
	if err != nil {
		return nil, err
	}
	pc := &procCoord{sh: sh, fleet: fleet, n: n}
	for w := range n {
		pc.stopped = append(pc.stopped, make(chan int, 4))
		pc.watch(w)
	}
	if h := sh.opts.hooks.fleetStarted; h != nil {
		h(fleet)
	}
	return pc, nil
}

// close ends the worker processes (run.Fleet.Close).
func (pc *procCoord) close() {
	pc.fleet.Close()
	if h := pc.sh.opts.hooks.fleet; h != nil {
		h(pc.fleet)
	}
}

func (pc *procCoord) watch(w int) {
	s := pc.fleet.Slot(w)
	go pc.read(w, s)
}

// read handles worker w's messages until its connection breaks.
func (pc *procCoord) read(w int, s *run.FleetSlot) {
	for {
		b, err := s.Conn.Control(context.Background())
		if err != nil {
			pc.lost(w, s, err)
			return
		}
		m, err := decodeMsg(b)
		if err != nil {
			pc.failCurrent(fmt.Errorf("worker process %d: %w", w, err))
			continue
		}
		pc.handle(w, s, m)
	}
}

// current is the running attempt if it is attempt, else nil; mu is held.
func (pc *procCoord) currentLocked(attempt int) *incarnation {
	if pc.cur == nil || pc.cur.attempt != attempt {
		return nil
	}
	return pc.cur
}

func (pc *procCoord) handle(w int, s *run.FleetSlot, m procMsg) {
	if m.Op == opTrace {
		// Drawn by any attempt, a stopped one too: it happened.
		if m.Trace != nil {
			pc.sh.env.Trace.Merge(*m.Trace)
		}
		return
	}
	if m.Op == opStopped {
		pc.linked.Add(m.Linked)
		select {
		case pc.stopped[w] <- m.Attempt:
		default:
		}
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	inc := pc.currentLocked(m.Attempt)
	if inc == nil {
		return // an attempt that was stopped: what its tasks did is void
	}
	switch m.Op {
	case opEvent:
		if m.Event != nil {
			inc.coord.post(m.Event.coordEvent())
		}
	case opHold:
		inc.coord.hold(checkpoint.ID(m.ID), fromWireLat(m.Rows))
	case opObs:
		if m.Obs == nil {
			return
		}
		if err := inc.obs.apply(*m.Obs); err != nil {
			inc.fail(fmt.Errorf("worker process %d: %w", w, err), "")
			return
		}
		if m.Obs.Kind == obsRead {
			pc.series[m.Obs.Input+"/"+m.Obs.Partition].Read(m.Obs.N, m.Obs.Offset)
			// Record-count faults count here, where every read arrives.
			if err := inc.env.Faults.Read(m.Obs.N); err != nil {
				inc.fail(err, checkpoint.TaskID(fmt.Sprintf("worker %d", w)))
			}
		}
	case opWriter:
		rx, err := s.Conn.OpenReceiver(m.Channel, inc.plan.job.Output.Schema, inc.opts.channelBuffers)
		if err != nil {
			inc.fail(fmt.Errorf("worker process %d: sink channel: %w", w, err), "")
			return
		}
		sw, err := inc.env.Sink.Writer(m.Subtask, m.Attempt)
		if err != nil {
			rx.Close()
			inc.fail(fmt.Errorf("sink writer of subtask %d: %w", m.Subtask, err), "")
			return
		}
		inc.wg.Add(1)
		go func() {
			defer inc.wg.Done()
			if err := serveWriter(inc.ctx, s.Conn, m.Channel, rx, sw); err != nil && inc.ctx.Err() == nil && s.Conn.Err() == nil {
				inc.fail(fmt.Errorf("sink writer of subtask %d: %w", m.Subtask, err), "")
			}
		}()
	case opFailed, opError:
		inc.fail(errors.New(m.Text), "")
	case opPoint:
		pc.answerPoint(s, inc, m)
	case opPeerLost:
		pc.peerLost(w, m.Subtask, m.Text, m.Why)
	}
}

// failCurrent fails the running attempt, if any, with err.
func (pc *procCoord) failCurrent(err error) {
	pc.mu.Lock()
	inc := pc.cur
	pc.mu.Unlock()
	if inc != nil {
		inc.fail(err, "")
	}
}

// lost is worker w's connection breaking: the worker is dead, and the
// attempt running ends as a crash. An incarnation replaced already was
// carried out already: its reader may see the break only once its
// replacement runs the next attempt, which it must not end.
func (pc *procCoord) lost(w int, s *run.FleetSlot, err error) {
	pc.mu.Lock()
	inc := pc.cur
	pc.mu.Unlock()
	if inc == nil || pc.fleet.Slot(w) != s || errors.Is(err, wire.ErrClosedByPeer) {
		return
	}
	at := s.KilledAt()
	cause := fmt.Sprintf("worker %d process killed (SIGKILL)", w)
	if at.IsZero() {
		at = s.BrokenAt()
		cause = fmt.Sprintf("worker %d process died on its own (%v)", w, err)
	}
	// Drawn where the bill puts it: at the SIGKILL, not at the detection.
	inc.env.Trace.Add(at, spacetime.Event{Kind: spacetime.Crash, Worker: w, Note: cause})
	inc.settle(outcome{kind: outCrash, at: at, cause: cause})
}

// peerLost is worker w's word that its direct link to worker p (at
// addr) broke. Almost always p is dead and its own connection says so at
// once; a p that still answers here past the heartbeat timeout cannot
// serve the attempt anyway, so it is killed, and the attempt recovers
// from that crash as from any other.
func (pc *procCoord) peerLost(w, p int, addr, why string) {
	s := pc.fleet.Slot(p)
	if s == nil || s.Peer != addr || s.Conn.Err() != nil {
		return
	}
	if l := pc.sh.env.Log; l != nil {
		l.Info(fmt.Sprintf("worker %d's link to worker %d (%s) broke: %s", w, p, addr, why))
	}
	_, timeout := pc.sh.env.Config.Heartbeats()
	go func() {
		select {
		case <-s.Gone():
		case <-time.After(timeout):
			if pc.fleet.Slot(p) == s {
				if l := pc.sh.env.Log; l != nil {
					l.Warn(fmt.Sprintf("worker %d's link to worker %d broke while worker %d still answers; killing worker %d", w, p, p, p))
				}
				_, _, _ = pc.fleet.Kill(p)
			}
		}
	}()
}

// kill SIGKILLs worker w's process for a fault; its broken connection
// ends the attempt (lost). It kills the incarnation the fault was meant
// for: one replaced meanwhile (the attempt ended otherwise) is left alone.
func (pc *procCoord) kill(w int) {
	s := pc.fleet.Slot(w)
	go func() {
		if pc.fleet.Slot(w) == s {
			_, _, _ = pc.fleet.Kill(w)
		}
	}()
}

// buildStubs makes the attempt's tasks as the coordinator holds them: an
// identity, and the way to the worker process that runs each.
func (inc *incarnation) buildStubs(rp *restoredPoint) {
	pl, pc := inc.plan, inc.proc
	p := pl.parallelism
	inc.byChain = make([][]*task, len(pl.chains))
	for _, c := range pl.chains {
		for sub := 0; sub < p; sub++ {
			t := &task{inc: inc, id: checkpoint.TaskID(taskLane(c, sub)), ch: c, sub: sub, ctx: inc.workerCtx[sub],
				alloc: inc.env.Alloc, wake: newWaker()}
			w, id, attempt := workerOf(sub, pc.n), string(t.id), inc.attempt
			t.remote = func(m ctrlMsg) { pc.ctrl(w, attempt, id, m) }
			inc.byChain[c.index] = append(inc.byChain[c.index], t)
			inc.tasks = append(inc.tasks, t)
		}
	}
	inc.restoredPos = map[string]int64{}
	for _, c := range pl.chains {
		if c.source == nil {
			continue
		}
		src := inc.env.Sources[c.source.Input]
		if src == nil {
			continue
		}
		for _, name := range src.Partitions() {
			inc.restoredPos[c.source.Input+"/"+name] = rp.sources[c.source.Input][name].Offset
		}
	}
}

// ctrl sends a task's control message to its worker process; a worker
// that is gone is the reader's to notice.
func (pc *procCoord) ctrl(w, attempt int, task string, m ctrlMsg) {
	if s := pc.fleet.Slot(w); s != nil {
		_ = sendMsg(s.Conn, procMsg{Op: opCtrl, Attempt: attempt, Task: task, Ctrl: m.kind, ID: uint64(m.id), At: nanos(m.at)})
	}
}

// start starts attempt inc on every worker process: the attempt's start
// with what it restores and every worker's mesh address (the links
// between two of them are theirs), and the checkpoint coordinator here.
func (pc *procCoord) start(inc *incarnation) {
	series := map[string]*report.SeriesReader{}
	pace := map[string]source.Schedule{}
	for _, c := range inc.plan.chains {
		if c.source == nil {
			continue
		}
		src := inc.env.Sources[c.source.Input]
		for k, name := range src.Partitions() {
			key := c.source.Input + "/" + name
			series[key] = inc.env.SeriesReader(c.source.Input, k, inc.restoredPos[key])
			if sc, ok := source.FixSchedule(src, k, source.Position{Partition: name, Offset: inc.restoredPos[key]}); ok {
				pace[key] = sc
			}
		}
	}
	pc.mu.Lock()
	pc.cur, pc.series = inc, series
	pc.mu.Unlock()
	st := &procStart{From: uint64(inc.from), FirstEpoch: inc.firstEpoch, Replayed: inc.replayed, Published: inc.publishedRaw, Pace: pace,
		Reads: inc.env.Trace.Reads(), Peers: pc.fleet.Peers()}
	for w := range pc.n {
		s := pc.fleet.Slot(w)
		if s.Conn.Err() != nil || sendMsg(s.Conn, procMsg{Op: opStart, Attempt: inc.attempt, Start: st}) != nil {
			// Died since the last replacement: its reader may have seen
			// it before this attempt was the running one.
			inc.settle(outcome{kind: outCrash, at: s.BrokenAt(), cause: fmt.Sprintf("worker %d process died before attempt %d started", w, inc.attempt)})
		}
	}
	inc.wg.Add(1)
	go inc.coord.run()
}

// detach makes inc no longer the running attempt: what its tasks still
// send is dropped.
func (pc *procCoord) detach(inc *incarnation) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.cur == inc {
		for _, sr := range pc.series {
			sr.Close()
		}
		pc.cur, pc.series = nil, nil
	}
}

// stopWorkers stops attempt on every live worker process and waits until
// each has (a worker that does not within stopGrace is killed, and is
// then dead).
func (pc *procCoord) stopWorkers(attempt int) {
	var wg sync.WaitGroup
	for w := range pc.n {
		s := pc.fleet.Slot(w)
		if s == nil || s.Conn.Err() != nil {
			continue
		}
		if sendMsg(s.Conn, procMsg{Op: opStop, Attempt: attempt}) != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			limit := time.NewTimer(stopGrace)
			defer limit.Stop()
			for {
				select {
				case a := <-pc.stopped[w]:
					if a == attempt {
						return
					}
				case <-s.Gone():
					return
				case <-limit.C:
					_, _, _ = pc.fleet.Kill(w)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// replaceDead replaces every dead worker process (its connection broke)
// before the next attempt and bills the first death in bill: detect
// measured from the kill to the broken connection, acquire from the
// replacements' fork to their ready, each with the modelled delay
// (--detect-delay, --acquire-delay) waited out on top and marked
// modelled. It returns when the replacements are ready.
func (pc *procCoord) replaceDead(ctx context.Context, bill *report.Crash) (time.Time, error) {
	var dead []*run.FleetSlot
	for w := range pc.n {
		if s := pc.fleet.Slot(w); s != nil && s.Conn.Err() != nil {
			dead = append(dead, s)
		}
	}
	r := pc.sh.env.Replacement()
	detected := time.Now()
	var first *run.FleetSlot
	for _, s := range dead {
		if first == nil || s.BrokenAt().Before(first.BrokenAt()) {
			first = s
		}
	}
	if first != nil {
		detected = first.BrokenAt()
		if k := first.KilledAt(); !k.IsZero() {
			bill.At = k
		} else {
			bill.At = detected // died on its own: the moment is not known
		}
	}
	for _, s := range dead {
		if err := pc.fleet.LostOnItsOwn(s.KilledAt(), fmt.Errorf("worker %d: %v", s.ID, s.Conn.Err())); err != nil {
			return time.Time{}, err
		}
	}
	from := r.Detected(ctx, bill, detected)
	var acquire time.Duration
	for _, s := range dead {
		a, err := pc.fleet.Replace(ctx, s.ID)
		if err != nil {
			return time.Time{}, err
		}
		acquire = max(acquire, a)
		pc.watch(s.ID)
	}
	ready := time.Now()
	if r.Acquire > 0 {
		ready = r.Acquired(ctx, bill, from)
		acquire += *bill.Acquire
	}
	bill.Acquire = &acquire
	return ready, nil
}

// crashWorker carries out an injected kill of worker w in a run with
// worker processes: its process is SIGKILLed, and the broken connection
// ends the attempt.
func (inc *incarnation) crashWorker(cr *fault.Crash) bool {
	if inc.proc == nil || cr.Worker < 0 {
		return false
	}
	inc.proc.kill(cr.Worker)
	return true
}
