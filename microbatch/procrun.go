package microbatch

// This file is the coordinator's side of the worker processes (--workers
// process): the fleet, which outlives a coordinator, one link per live
// incarnation of a worker (its data channels and the loop that reads its
// control stream), the worker's reads and points answered, kills carried
// out as SIGKILLs, deaths seen as broken connections, and replacements.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// procRun is a run's worker processes as its coordinators see them.
type procRun struct {
	fleet *run.Fleet
	topo  *topology
	env   *run.Env
	seq   atomic.Int64 // batch attempts, over every coordinator
	// exchanged counts the rows the workers took from each other's hash
	// exchanges (straight from one to the other), sunk the rows they sent
	// up for the sink.
	exchanged, sunk atomic.Int64
	// restored is the bytes of state the workers read restoring (their
	// reset answers), added to what the coordinator read for a bill.
	restored atomic.Int64

	closeOnce sync.Once

	mu    sync.Mutex
	links []*procLink
	// pos is how far each partition's reader has read (its last reported
	// read), for the bill of a crash.
	pos []int64
}

// procLink is one incarnation of a worker process as the coordinator
// holds it.
type procLink struct {
	id   int
	slot *run.FleetSlot
	peer *rpcPeer
	up   map[int]*wire.Receiver
	// gone tells the other workers this one died (procRun.peerGone).
	gone func(*procLink)
	// coord is the coordinator the link serves (nil between two).
	coord atomic.Pointer[coordinator]
	// shell is the coordinator's worker bound to this incarnation.
	shell atomic.Pointer[worker]
	// done is closed once dispatch has handled the broken connection.
	done chan struct{}
	// trace is the run's diagram, which the worker's answers add to.
	trace *spacetime.Recorder
}

func (l *procLink) broken() bool { return l.slot.Conn.Err() != nil }

// lost marks w dead once its process's death is on record: the link's
// dispatch bills it (procBroken) before it ends, and a repair that saw w
// dead before that would find no crash to bill.
func (l *procLink) lost(w *worker) {
	t := time.NewTimer(lostWait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
	}
	w.kill()
}

// lostWait bounds how long lost waits for a broken connection's
// dispatch; it returns at once in practice (the read loop sees the
// error first).
const lostWait = 5 * time.Second

// startProcRun starts the run's worker processes and links them.
func startProcRun(ctx context.Context, env *run.Env, opts *options, runID string) (*procRun, error) {
	topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
	if err != nil {
		return nil, err
	}
	if err := checkProcessTopology(topo); err != nil {
		return nil, run.RefusedError{Err: err}
	}
	f, err := startWorkerProcesses(ctx, env, opts, runID)
	if err != nil {
		return nil, err
	}
	pr := &procRun{fleet: f, topo: topo, env: env, links: make([]*procLink, opts.parallelism), pos: make([]int64, len(topo.parts))}
	for id := range pr.links {
		if err := pr.link(id); err != nil {
			f.Close()
			return nil, err
		}
	}
	return pr, nil
}

// link opens the data channels of worker id's current incarnation and
// starts reading its control stream.
func (pr *procRun) link(id int) error {
	s := pr.fleet.Slot(id)
	l := &procLink{id: id, slot: s, peer: newRPCPeer(s.Conn), up: map[int]*wire.Receiver{},
		done: make(chan struct{}), trace: pr.env.Trace, gone: pr.peerGone}
	for si, st := range pr.topo.stages {
		if pr.topo.hasUp(si) {
			rx, err := s.Conn.OpenReceiver(upChannel(si), st.Schema, 64)
			if err != nil {
				return err
			}
			l.up[si] = rx
		}
	}
	pr.mu.Lock()
	pr.links[id] = l
	pr.mu.Unlock()
	go l.dispatch()
	return nil
}

// dispatch reads the worker's control stream: answers go to their
// callers, reads and points to the coordinator the link serves. A broken
// connection is the worker's death.
func (l *procLink) dispatch() {
	defer close(l.done)
	defer func() {
		for _, rx := range l.up {
			rx.Close()
		}
	}()
	for {
		b, err := l.slot.Conn.Control(context.Background())
		if err != nil {
			l.gone(l)
			if c := l.coord.Load(); c != nil {
				c.procBroken(l, err)
			} else if w := l.shell.Load(); w != nil {
				w.kill()
			}
			return
		}
		m, err := decodeMsg(b)
		if err != nil {
			_ = l.slot.Conn.Close()
			continue
		}
		if m.Trace != nil {
			l.trace.Merge(*m.Trace) // drawn by any attempt: it happened
		}
		switch {
		case m.Op == opAnswer:
			l.peer.delivered(m)
		case l.coord.Load() == nil:
			// Between two coordinators: the worker is killed and replaced.
		default:
			l.coord.Load().procRequest(l, m)
		}
	}
}

// current is worker id's link.
func (pr *procRun) current(id int) *procLink {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.links[id]
}

// replace starts a fresh process for worker id (the old one is dead, or
// is killed first) and links it; it returns the measured acquire.
func (pr *procRun) replace(ctx context.Context, id int) (time.Duration, error) {
	acquire, err := pr.fleet.Replace(ctx, id)
	if err != nil {
		return 0, err
	}
	return acquire, pr.link(id)
}

// peerGone tells every other worker that dead's process died, so that a
// stage waiting for its link (to send it rows, or to take its rows) ends
// now and its batch is rolled back, not after the link's deadline.
func (pr *procRun) peerGone(dead *procLink) {
	if dead.slot.Peer == "" {
		return
	}
	pr.mu.Lock()
	others := make([]*procLink, 0, len(pr.links))
	for _, l := range pr.links {
		if l != nil && l != dead {
			others = append(others, l)
		}
	}
	pr.mu.Unlock()
	m := procMsg{Op: opPeerGone, GonePeer: dead.id + 1, GoneAddr: dead.slot.Peer}
	for _, l := range others {
		_ = sendMsg(l.slot.Conn, m) // a broken one is dying too
	}
}

// count adds what a worker sent up to the figures.
func (pr *procRun) count(u *upData) {
	for _, b := range u.out {
		pr.sunk.Add(b.NumRows())
	}
}

func (pr *procRun) setPos(g int, pos int64) {
	pr.mu.Lock()
	pr.pos[g] = pos
	pr.mu.Unlock()
}

func (pr *procRun) positions() []int64 {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.pos)
}

// close ends the worker processes at the end of the run.
func (pr *procRun) close() {
	pr.closeOnce.Do(func() {
		for _, l := range pr.links {
			if l != nil {
				l.coord.Store(nil)
			}
		}
		pr.fleet.Close()
	})
}

// procRequest answers a worker's read or point: the coordinator counts
// and decides; a fault that fires for this worker is carried out as a
// SIGKILL of its process, which is all the answer it gets.
func (c *coordinator) procRequest(l *procLink, m procMsg) {
	var err error
	switch m.Op {
	case opRead:
		if m.Part < 0 || m.Part >= len(c.topo.parts) || c.topo.parts[m.Part].owner != l.id || m.N <= 0 {
			err = fmt.Errorf("a read of %d records of partition %d, which worker %d does not read", m.N, m.Part, l.id)
			break
		}
		c.met.read(m.N)
		c.proc.setPos(m.Part, m.Pos)
		err = c.faults.Read(m.N)
	case opPoint:
		err = c.faults.Point(m.Point, l.id)
	default:
		err = fmt.Errorf("unexpected request %q", m.Op)
	}
	if cr, ok := fault.AsCrash(err); ok {
		c.killWorker(cr)
		if cr.Worker == l.id {
			return
		}
		err = nil // another worker's kill: this one goes on
	}
	_ = sendMsg(l.slot.Conn, answer(m, procMsg{}, err))
}

// procBroken is a worker process's connection seen broken while a
// coordinator holds it. A process the run did not kill died on its own
// (OOM, a panic, a kill from outside, or it gave up and closed): that is
// billed as a crash of its own, like a kill.
func (c *coordinator) procBroken(l *procLink, why error) {
	defer c.notifyDeath()
	if !l.slot.KilledAt().IsZero() {
		// killWorker has billed it, and its worker is dead already.
		if w := l.shell.Load(); w != nil {
			w.kill()
		}
		return
	}
	if err := c.proc.fleet.LostOnItsOwn(time.Time{}, why); err != nil {
		c.procFatal.CompareAndSwap(nil, &err)
	}
	// As in killWorker, the crash is on record before the worker dies,
	// under wmu: a repair that sees the death finds the crash to bill.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	r := c.met.crash(fmt.Sprintf("worker %d process died on its own (%v)", l.id, why), time.Now(), nil)
	c.recMu.Lock()
	c.pendingRecoveries = append(c.pendingRecoveries, pendingCrash{r: r, worker: l.id})
	c.recMu.Unlock()
	if w := l.shell.Load(); w != nil {
		w.kill()
	}
}

func (c *coordinator) notifyDeath() {
	select {
	case c.deathCh <- struct{}{}:
	default:
	}
}

// procKill SIGKILLs worker id's current process, if it lives (called with
// wmu held, from killWorker).
func (c *coordinator) procKill(id int) {
	l := c.proc.current(id)
	if l == nil || l.broken() {
		return
	}
	_, _, _ = c.proc.fleet.Kill(id)
}

// bindWorker binds the coordinator's worker w to its process's current
// incarnation, replacing a dead one first; it restores the operators from
// the committed state version (and, with reopen, the readers at the
// committed positions). A worker that dies meanwhile is left dead, for
// the next repair.
func (c *coordinator) bindWorker(ctx context.Context, w *worker, reopen bool) error {
	l := c.proc.current(w.id)
	if l.broken() || !l.slot.KilledAt().IsZero() {
		if _, err := c.proc.replace(ctx, w.id); err != nil {
			return err
		}
		l = c.proc.current(w.id)
		reopen = true
	}
	l.coord.Store(c)
	l.shell.Store(w)
	w.link = l
	if reopen {
		w.started = false // the new readers start in startReaders
		for _, p := range c.topo.parts {
			if p.owner == w.id {
				c.proc.setPos(p.global, c.ends[p.global])
			}
		}
	}
	m := procMsg{Op: opReset, Version: c.stateVersion, Index: c.idx, Watermark: c.wm, Reopen: reopen, Ends: c.ends,
		Reads: c.env.Trace.Reads()}
	if reopen {
		m.Pace = c.schedules(w.id)
	}
	a, err := l.peer.call(ctx, m)
	if err == nil {
		c.proc.restored.Add(a.Read)
	}
	if l.broken() {
		l.lost(w)
		return nil
	}
	return err
}

// stateRead is the bytes of state read so far, for a restore's bill
// (restore_bytes): the coordinator's reads, and with worker processes
// what they read restoring.
func (c *coordinator) stateRead() int64 {
	n := c.counted.Read()
	if c.proc != nil {
		n += c.proc.restored.Load()
	}
	return n
}

// schedules are the paced partitions' schedules of worker's readers,
// fixed here where a simulated worker's reader would open them
// (source.FixSchedule): every process reads on this one.
func (c *coordinator) schedules(worker int) map[int]source.Schedule {
	var out map[int]source.Schedule
	for _, p := range c.topo.parts {
		if p.owner != worker {
			continue
		}
		if sc, ok := source.FixSchedule(p.src, p.index, source.Position{Partition: p.name, Offset: c.ends[p.global]}); ok {
			if out == nil {
				out = map[int]source.Schedule{}
			}
			out[p.global] = sc
		}
	}
	return out
}

// procStartReaders starts the readers of worker w's process, which its
// bind opened (a worker that dies meanwhile is left dead).
func (c *coordinator) procStartReaders(ctx context.Context, w *worker) {
	l := w.link
	if w.dead() || l == nil {
		return
	}
	w.started = true
	if _, err := l.peer.call(ctx, procMsg{Op: opStartReaders}); errors.Is(err, errPeerGone) {
		l.lost(w)
	} else if err != nil {
		w.kill() // its reads never start: the next repair replaces it
	}
}

// replaceProcs is the detect and acquire of the dead workers' processes:
// detect measured from the first crash's record (the kill) to its broken
// connection, acquire from each replacement's fork to its ready; modelled
// delays (--detect-delay, --acquire-delay) are waited out on top and
// marked modelled. The replacements restore later, in newWorker.
func (c *coordinator) replaceProcs(ctx context.Context, first pendingCrash, dead map[int]bool) (*report.Crash, time.Time, error) {
	waited := &report.Crash{At: first.r.At}
	detected := time.Now()
	if l := c.proc.current(first.worker); l != nil && l.broken() {
		detected = l.slot.BrokenAt()
	}
	r := c.env.Replacement()
	from := r.Detected(ctx, waited, detected)
	var acquire time.Duration
	for _, id := range slices.Sorted(maps.Keys(dead)) {
		a, err := c.proc.replace(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		acquire += a
	}
	if r.Acquire > 0 {
		r.Acquired(ctx, waited, from)
		acquire += *waited.Acquire
	}
	waited.Acquire = &acquire
	return waited, time.Now(), nil
}
