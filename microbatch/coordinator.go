package microbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// coordinator is one incarnation of the coordinating process. It is built
// from durable storage, the (re-opened) sources and the sink only, and all
// of its memory, and its workers' memory, is dropped when it crashes: the
// next incarnation is a new value that never sees this one.
type coordinator struct {
	env     *run.Env
	opts    *options
	store   storage.Store
	prefix  string
	topo    *topology
	par     int
	alloc   memory.Allocator
	m       *Machine
	met     *metrics
	faults  *fault.Injector
	attempt int // sink writer attempt numbers handed out

	// workers is written only by the coordinator goroutine, under wmu;
	// reader goroutines read it under wmu to carry out a worker kill.
	wmu     sync.Mutex
	workers []*worker
	deathCh chan struct{}
	// pendingRecoveries are worker crashes not yet repaired.
	recMu             sync.Mutex
	pendingRecoveries []*recovery

	bg       sync.WaitGroup // background work (retention, stray writes)
	async    chan asyncResult
	inflight int // actions running beside the loop
	// crash is the coordinator crash fired at one of its points, if any.
	// The seal runs two steps at once, and a coordinator that has crashed
	// in one of them must reach no further point in the other.
	crashMu   sync.Mutex
	crash     error
	gcRunning atomic.Bool
	lastGC    int64

	// Progress as of the newest committed batch.
	committed    int64
	ends         []int64
	tracker      eventtime.State
	wm           int64
	stateVersion int64
	idx          stateIndex
	lastFull     int64
	cacheMu      sync.Mutex
	commitVer    map[int64]int64 // batch -> state version (retention)
	manifestMin  map[int64]int64 // state version -> oldest object version it refers to

	// replay holds the logged batches to run again after a fallback, by
	// batch id (fallback.go); planning takes them instead of a new plan.
	replay map[int64]*offsetsEntry

	// next is the batch planned ahead while cur waits for its commit entry
	// and publish (see PlanningAhead), nil if none.
	next *aheadPlan

	// The batch in flight.
	cur       *offsetsEntry
	curRerun  bool
	curAhead  bool // cur was planned ahead
	capped    bool
	planStart time.Time
	steps     stepTotals
	handover  []handoverRows
	curRows   int64
	curOut    int64
	curLate   int64
	visibleAt time.Time
	ranStart  bool // the current attempt's run has begun (for the bill)
	pending   struct {
		idx          stateIndex
		version      int64
		full         bool
		written      int64
		rows, bytes  int64
		changedState bool
	}

	// rerunReport is the lost-piece bill of a rerun-batch recovery, until
	// the re-run has run (lineage.go).
	rerunReport *lostPieceReport
}

func newCoordinator(env *run.Env, opts *options, runID string, incarnation int, met *metrics) (*coordinator, error) {
	topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
	if err != nil {
		return nil, err
	}
	c := &coordinator{
		env: env, opts: opts, store: env.PatientStore().Store(), prefix: runPrefix(env.Job.Name, runID), topo: topo,
		par: opts.parallelism, alloc: env.Alloc, m: NewMachine(opts.trigger), met: met, faults: env.Faults,
		attempt: incarnation * 10000, deathCh: make(chan struct{}, 1), async: make(chan asyncResult, 2),
		commitVer: map[int64]int64{}, manifestMin: map[int64]int64{}, lastGC: -1,
	}
	if c.alloc == nil {
		c.alloc = memory.DefaultAllocator
	}
	c.m.lateOffsets = opts.hooks.lateOffsets
	c.m.noAhead = opts.hooks.noPlanAhead
	return c, nil
}

// run restores from durable storage and drives the protocol until the
// bounded input is committed, ctx is done, or the coordinator crashes (a
// *fault.Crash error).
func (c *coordinator) run(ctx context.Context, crashed *recovery, reprocessed int64) error {
	restoreStart := time.Now()
	rp, err := c.restore(ctx)
	if err != nil {
		return err
	}
	restored := time.Now()
	c.met.restoredFrom(rp.LastCommitted, c.ends)
	c.met.recovered(crashed, restoreStart, restored, reprocessed)
	// Events are fed one at a time, in the order they arrive: those the
	// actions return at once, then those of actions still in flight.
	queue := []Event{Started{Now: time.Now(), LastCommitted: rp.LastCommitted, Rerun: rp.Rerun}}
	for {
		if len(queue) == 0 {
			if c.inflight == 0 {
				return fmt.Errorf("internal error: state %s produced no event", c.m.State())
			}
			ev, err := c.await(ctx)
			if err != nil {
				return err
			}
			queue = append(queue, ev)
		}
		ev := queue[0]
		queue = queue[1:]
		acts, err := c.m.Step(ev)
		if err != nil {
			return err
		}
		for _, a := range acts {
			// A death preempts the remaining actions and events, except
			// the rebuild that repairs it. The actions in flight end
			// first, so the machine learns what they made durable.
			if _, repair := a.(Rebuild); !repair && c.anyDead() {
				fin, err := c.drain()
				if err != nil {
					return err
				}
				queue = []Event{WorkerLost{Now: time.Now(), Finished: append(queue, fin...)}}
				break
			}
			if _, ok := a.(Finish); ok {
				return c.finish(ctx)
			}
			next, err := c.exec(ctx, a)
			if err != nil {
				return err
			}
			if next != nil {
				queue = append(queue, next)
			}
		}
	}
}

// point passes the named coordinator crash point. Once one crash has
// fired, every later point returns it: a dead process reaches no point.
func (c *coordinator) point(name string) error {
	c.crashMu.Lock()
	defer c.crashMu.Unlock()
	if c.crash != nil {
		return c.crash
	}
	err := c.faults.Point(name, -1)
	if _, ok := fault.AsCrash(err); ok {
		c.crash = err
	}
	return err
}

// asyncResult is the outcome of an action that runs concurrently with the
// I/O loop (FlushSink, CommitState, LogCommit, LogOffsets). apply, run on
// the loop's goroutine when the event is collected, records what the
// action changed in the coordinator.
type asyncResult struct {
	ev    Event
	apply func()
	err   error
}

// goAsync runs fn beside the loop; await collects its event. The goroutine
// is tracked in c.bg, so a crash that returns before it ends still waits
// for it in close, as a real crash leaves a write to land or not. fn must
// not touch the coordinator's fields; its apply does that.
func (c *coordinator) goAsync(fn func() (Event, func(), error)) {
	c.inflight++
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ev, apply, err := fn()
		c.async <- asyncResult{ev, apply, err}
	}()
}

// serially, with the serialSeal hook, waits for the action just started
// beside the loop, so that the seal's steps run one after the other, in
// the order they had before they overlapped: state, then sink.
func (c *coordinator) serially(ctx context.Context) func(Event, error) (Event, error) {
	return func(ev Event, err error) (Event, error) {
		if err != nil || ev != nil || !c.opts.hooks.serialSeal || c.inflight == 0 {
			return ev, err
		}
		return c.await(ctx)
	}
}

// await returns the event of the next concurrent action to finish.
func (c *coordinator) await(ctx context.Context) (Event, error) {
	select {
	case r := <-c.async:
		c.inflight--
		if r.err == nil && r.apply != nil {
			r.apply()
		}
		return r.ev, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain waits for every concurrent action still in flight and returns
// their events, for a rebuild to learn what is durable. An error ends the
// run: an injected coordinator crash at a mid-write point still crashes
// the coordinator, and a failed write still fails the run.
func (c *coordinator) drain() ([]Event, error) {
	var evs []Event
	var first error
	for ; c.inflight > 0; c.inflight-- {
		r := <-c.async
		switch {
		case r.err != nil:
			if first == nil {
				first = r.err
			}
		default:
			if r.apply != nil {
				r.apply()
			}
			evs = append(evs, r.ev)
		}
	}
	return evs, first
}

func (c *coordinator) exec(ctx context.Context, a Action) (Event, error) {
	switch a := a.(type) {
	case WaitUntil:
		return c.waitUntil(ctx, a.At)
	case Point:
		return nil, c.point(a.Name)
	case Plan:
		return c.plan(a.Batch, a.Ahead)
	case LogOffsets:
		return c.logOffsets(ctx, a.Batch)
	case Run:
		return c.runBatch(ctx, a.Rerun)
	case CommitState:
		ev, err := c.serially(ctx)(c.commitState(ctx))
		if err == nil && c.opts.hooks.serialSeal {
			// As before the overlap: the sink flushes after the state.
			_, err = c.flushSink(ctx)
		}
		return ev, err
	case FlushSink:
		if c.opts.hooks.serialSeal {
			return nil, nil // flushed after the state (above)
		}
		return c.flushSink(ctx)
	case LogCommit:
		return c.logCommit(ctx)
	case Publish:
		return c.publish(ctx)
	case Rebuild:
		return c.rebuild(ctx, a)
	}
	return nil, fmt.Errorf("internal error: unknown action %T", a)
}

// status reports, for the bill of a coordinator crash, what the crash cut
// short: read positions and the batch in flight.
func (c *coordinator) status() (highWater []int64, inFlight bool, logged bool, reprocessed int64) {
	highWater = make([]int64, len(c.topo.parts))
	for _, w := range c.workers {
		for _, r := range w.readers {
			pos, _, _ := r.q.available()
			highWater[r.part.global] = pos
		}
	}
	if c.cur != nil && c.m.State() != Publishing {
		inFlight, logged = true, c.m.OffsetsDurable()
		if c.ranStart {
			reprocessed = c.cur.rows()
		}
	}
	return highWater, inFlight, logged, reprocessed
}

// close tears everything down: what the dead coordinator and its workers
// held is released and never looked at again.
func (c *coordinator) close() {
	c.wmu.Lock()
	ws := c.workers
	c.workers = nil
	c.wmu.Unlock()
	for _, w := range ws {
		if w != nil {
			w.teardown()
		}
	}
	c.bg.Wait()
}

// ---- restore ----

func (c *coordinator) get(ctx context.Context, name string) ([]byte, error) {
	return c.store.Get(ctx, c.prefix+name)
}

func (c *coordinator) put(ctx context.Context, name string, data []byte) error {
	return c.store.Put(ctx, c.prefix+name, data)
}

func (c *coordinator) list(ctx context.Context) (Listing, error) {
	objs, err := c.store.List(ctx, c.prefix)
	if err != nil {
		return Listing{}, err
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.Name[len(c.prefix):]
	}
	return ParseListing(names), nil
}

// restore rebuilds everything from durable storage, re-opened sources and
// the sink's own recovery.
func (c *coordinator) restore(ctx context.Context) (RestartPlan, error) {
	l, err := c.list(ctx)
	if err != nil {
		return RestartPlan{}, fmt.Errorf("listing %s%s: %w", c.store.URL(), c.prefix, err)
	}
	rp, err := PlanRestart(l)
	if err != nil {
		return rp, fmt.Errorf("%s%s: %w", c.store.URL(), c.prefix, err)
	}
	nparts := len(c.topo.parts)
	c.committed = rp.LastCommitted
	c.ends = make([]int64, nparts)
	c.tracker = eventtime.NewTracker(nparts, c.env.Job.Params.MaxDisorder).State()
	c.wm = operator.NoWatermark
	c.stateVersion, c.lastFull = -1, -1
	c.idx = stateIndex{}
	for si, st := range c.topo.stateful {
		if st {
			c.idx[c.topo.stages[si].ID] = &[keygroup.Count]string{}
		}
	}
	ls := loadedState{}
	if rp.LastCommitted >= 0 {
		// The newest committed batch that reads whole, and the batches to
		// run again after it (fallback.go).
		pt, chain, err := c.restorePoint(ctx, l, rp)
		if err != nil {
			return rp, err
		}
		ls = pt.ls
		for i, r := range pt.oe.Ranges {
			c.ends[i] = r.End
		}
		c.tracker, c.wm = pt.oe.Tracker, pt.oe.Watermark
		c.stateVersion = pt.ce.StateVersion
		c.commitVer[pt.batch] = pt.ce.StateVersion
		c.idx = pt.idx
		if pt.ce.StateVersion >= 0 {
			if pt.full {
				c.lastFull = pt.ce.StateVersion
			} else {
				c.lastFull = pt.minObj
			}
		}
		rp.LastCommitted, rp.Rerun = pt.batch, -1
		c.committed = pt.batch
		if len(chain) > 0 {
			rp.Rerun = chain[0].Batch
			c.cur, c.curRerun = chain[0], true
			c.replay = map[int64]*offsetsEntry{}
			for _, e := range chain[1:] {
				c.replay[e.Batch] = e
			}
		}
	} else if rp.Rerun >= 0 {
		oe, err := c.readOffsets(ctx, rp.Rerun)
		if err == nil {
			err = startsAt(oe, rp.LastCommitted, c.ends)
		}
		switch {
		case err == nil:
			c.cur, c.curRerun = oe, true
		case stopsFallback(ctx, err):
			return rp, err
		default:
			if err := c.unreadableRerun(rp.Rerun, "", err); err != nil {
				return rp, err
			}
			rp.Rerun = -1
		}
	}
	defer ls.release()
	if err := c.env.Sink.Recover(rp.LastCommitted); err != nil {
		return rp, fmt.Errorf("recovering the sink to batch %d: %w", rp.LastCommitted, err)
	}
	ws := make([]*worker, c.par)
	for i := range ws {
		w, err := c.newWorker(ctx, i, ls, nil)
		if err != nil {
			for _, w := range ws[:i] {
				w.teardown()
			}
			return rp, err
		}
		ws[i] = w
	}
	c.wmu.Lock()
	c.workers = ws
	c.wmu.Unlock()
	for _, w := range ws {
		c.startReaders(ctx, w)
	}
	c.lastGC = rp.LastCommitted
	c.startGC(ctx, l)
	return rp, nil
}

func (c *coordinator) readCommit(ctx context.Context, n int64) (*commitEntry, error) {
	data, err := c.get(ctx, commitName(n))
	if err != nil {
		return nil, fmt.Errorf("reading commit entry %d: %w", n, err)
	}
	e, err := decodeCommit(data)
	if err != nil {
		return nil, fmt.Errorf("commits/%d: %w", n, err)
	}
	if e.Batch != n {
		return nil, fmt.Errorf("commits/%d holds batch %d", n, e.Batch)
	}
	return e, nil
}

func (c *coordinator) readOffsets(ctx context.Context, n int64) (*offsetsEntry, error) {
	data, err := c.get(ctx, offsetsName(n))
	if err != nil {
		return nil, fmt.Errorf("reading offsets entry %d: %w", n, err)
	}
	e, err := decodeOffsets(data)
	if err != nil {
		return nil, fmt.Errorf("offsets/%d: %w", n, err)
	}
	if e.Batch != n || e.Job != c.env.Job.Name || len(e.Ranges) != len(c.topo.parts) {
		return nil, fmt.Errorf("offsets/%d was written for batch %d of job %s with %d partitions; this run is job %s with %d partitions",
			n, e.Batch, e.Job, len(e.Ranges), c.env.Job.Name, len(c.topo.parts))
	}
	for i, r := range e.Ranges {
		p := c.topo.parts[i]
		if r.Input != p.input || r.Partition != p.name || r.End < r.Start {
			return nil, fmt.Errorf("offsets/%d: range %d is %s/%s [%d,%d), this run's partition %d is %s/%s",
				n, i, r.Input, r.Partition, r.Start, r.End, i, p.input, p.name)
		}
	}
	return e, nil
}

func (c *coordinator) readManifest(ctx context.Context, v int64) (idx stateIndex, full bool, minObj int64, err error) {
	data, err := c.get(ctx, manifestName(v))
	if err != nil {
		return nil, false, 0, fmt.Errorf("reading state manifest %d: %w", v, err)
	}
	me, err := decodeManifest(data)
	if err != nil {
		return nil, false, 0, fmt.Errorf("state manifest %d: %w", v, err)
	}
	idx, err = me.index(checkStateObjectName)
	if err != nil {
		return nil, false, 0, err
	}
	for si, st := range c.topo.stateful {
		id := c.topo.stages[si].ID
		if st && idx[id] == nil {
			idx[id] = &[keygroup.Count]string{}
		}
	}
	for id := range idx {
		if si, ok := c.topo.index[id]; !ok || !c.topo.stateful[si] {
			return nil, false, 0, fmt.Errorf("state manifest %d holds stage %q, which is not a stateful stage of job %s", v, id, c.env.Job.Name)
		}
	}
	minObj = minObjectVersion(idx, v)
	c.cacheMu.Lock()
	c.manifestMin[v] = minObj
	c.cacheMu.Unlock()
	return idx, me.Full, minObj, nil
}

func minObjectVersion(idx stateIndex, v int64) int64 {
	m := v
	for o := range idx.objects() {
		if ov, ok := parseID(o[len(dirState):]); ok && ov < m {
			m = ov
		}
	}
	return m
}

// newWorker builds worker id: operators restored from ls, the sink writer,
// and (unless keep is given) readers re-opened at the committed positions.
// keep is a surviving worker whose readers and queues are kept.
func (c *coordinator) newWorker(ctx context.Context, id int, ls loadedState, keep *worker) (*worker, error) {
	w := keep
	if w == nil {
		w = &worker{id: id, stop: make(chan struct{})}
	}
	w.ops = make([]operator.Operator, len(c.topo.stages))
	w.fps = make([][keygroup.Count]uint64, len(c.topo.stages))
	fail := func(err error) (*worker, error) {
		if keep == nil {
			w.teardown()
		}
		return nil, err
	}
	kgs := keygroup.RangeFor(id, c.par)
	failEmit := operator.EmitFunc(func(b arrow.RecordBatch) error {
		return fmt.Errorf("restored state emitted %d rows when the watermark of the restored batch was delivered again: state version and watermark disagree", b.NumRows())
	})
	for si, st := range c.topo.stages {
		if st.Kind != job.OperatorStage {
			continue
		}
		op, err := st.New()
		if err != nil {
			return fail(err)
		}
		w.ops[si] = op
		octx := operator.Context{Alloc: c.alloc, Subtask: id, Parallelism: c.par, KeyGroups: keygroup.All}
		if st.Keyed {
			octx.KeyGroups = kgs
		}
		if err := op.Open(octx); err != nil {
			return fail(fmt.Errorf("opening stage %s subtask %d: %w", st.ID, id, err))
		}
		if !c.topo.stateful[si] {
			continue
		}
		var parts []operator.KeyGroupState
		if a := ls[st.ID]; a != nil {
			for kg := kgs.Start; kg < kgs.End; kg++ {
				if a[kg].Batch != nil {
					parts = append(parts, a[kg])
				}
			}
		}
		sop := op.(operator.Stateful)
		if len(parts) > 0 {
			if err := sop.Restore(parts); err != nil {
				return fail(fmt.Errorf("restoring stage %s subtask %d from state version %d: %w", st.ID, id, c.stateVersion, err))
			}
		}
		if c.env.Job.UsesEventTime {
			if err := op.AdvanceWatermark(c.wm, failEmit); err != nil {
				return fail(err)
			}
		}
		if err := op.Flush(failEmit); err != nil {
			return fail(err)
		}
		snap, err := w.takeSnapshot(si)
		if err != nil {
			return fail(err)
		}
		w.fps[si] = snap.fps
		snap.release()
	}
	if c.env.Job.UsesEventTime {
		for si, op := range w.ops {
			if op == nil || c.topo.stateful[si] {
				continue
			}
			if err := op.AdvanceWatermark(c.wm, failEmit); err != nil {
				return fail(err)
			}
		}
	}
	wr, err := c.env.Sink.Writer(id, c.attempt)
	c.attempt++
	if err != nil {
		return fail(err)
	}
	w.writer = wr
	if keep != nil {
		return w, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	w.rctx = rctx
	for _, p := range c.topo.parts {
		if p.owner != id {
			continue
		}
		r, err := p.src.Open(rctx, p.index, source.Position{Partition: p.name, Offset: c.ends[p.global]}, c.alloc)
		if err != nil {
			return fail(fmt.Errorf("opening %s partition %s at %d: %w", p.input, p.name, c.ends[p.global], err))
		}
		c.met.addLost(r.Lost())
		pr := &partReader{part: p, q: newPartQueue(c.ends[p.global]), reader: r, done: make(chan struct{})}
		w.readers = append(w.readers, pr)
	}
	return w, nil
}

// startReaders starts the read-ahead goroutines of a new worker, once it
// is in its slot (a read can kill any worker).
func (c *coordinator) startReaders(ctx context.Context, w *worker) {
	if w.started {
		return
	}
	w.started = true
	cfg := readerConfig{
		rows: c.opts.readRows, limit: c.opts.prefetch, faults: c.faults, onRead: c.met.read,
		onCrash: c.killWorker, stop: w.stop,
	}
	for _, pr := range w.readers {
		go pr.loop(w.rctx, cfg)
	}
}

// killWorker carries out a worker crash decided by the injector: the
// worker stops and everything it holds will be dropped by the rebuild.
func (c *coordinator) killWorker(cr *fault.Crash) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if cr.Worker < 0 || cr.Worker >= len(c.workers) || c.workers[cr.Worker] == nil {
		// The coordinator is down: the worker is gone already. The fault
		// still counts, and the coordinator's recovery covers it.
		c.met.crash(fmt.Sprintf("worker %d killed (%s) while its coordinator was down", cr.Worker, cr.Spec), time.Now(), nil)
		return
	}
	w := c.workers[cr.Worker]
	if w.dead() {
		c.met.crash(fmt.Sprintf("worker %d killed (%s) while already down", cr.Worker, cr.Spec), time.Now(), nil)
		return
	}
	// The crash is on record before the worker dies: the coordinator may
	// see the death and rebuild at once, and that rebuild must find the
	// crash to bill (it was missed, leaving a crash without a recovery).
	r := c.met.crash(fmt.Sprintf("worker %d killed (%s)", cr.Worker, cr.Spec), time.Now(), nil)
	c.recMu.Lock()
	c.pendingRecoveries = append(c.pendingRecoveries, r)
	c.recMu.Unlock()
	w.kill()
	select {
	case c.deathCh <- struct{}{}:
	default:
	}
}

func (c *coordinator) anyDead() bool {
	for _, w := range c.workers {
		if w.dead() {
			return true
		}
	}
	return false
}

// rebuild replaces every dead worker. With Rollback the survivors'
// operators are rebuilt too, from the committed state version, because
// they have absorbed part of the batch that failed.
func (c *coordinator) rebuild(ctx context.Context, r Rebuild) (Event, error) {
	start := time.Now()
	if _, err := c.drain(); err != nil { // nothing is in flight by now
		return nil, err
	}
	c.takeDeaths()
	var need []int
	for _, w := range c.workers {
		if w.dead() {
			w.teardown()
			need = append(need, w.id)
		} else if r.Rollback {
			w.closeOps()
			if w.writer != nil {
				_ = w.writer.Close()
				w.writer = nil
			}
			need = append(need, w.id)
		}
	}
	if r.Rollback {
		// No writer is open: staged output of the failed batch is discarded.
		if err := c.env.Sink.Recover(c.committed); err != nil {
			return nil, fmt.Errorf("recovering the sink to batch %d: %w", c.committed, err)
		}
	}
	if r.Failed >= 0 || r.Discarded >= 0 {
		c.met.batchLost(r.Failed >= 0)
	}
	if err := c.replaceWorkers(ctx, need); err != nil {
		return nil, err
	}
	if r.Ahead < 0 {
		if c.next != nil && r.Discarded == c.next.e.Batch {
			r.Discarded = -1 // dropped below; c.cur is still published
		}
		c.next = nil
	}
	if r.Discarded >= 0 {
		c.cur = nil
	}
	if r.Failed >= 0 {
		c.curRerun = true
	}
	reprocessed := int64(0)
	if r.Rollback && r.Failed >= 0 && c.cur != nil {
		reprocessed = c.cur.rows()
	}
	primary := c.takeRecoveries()
	c.met.recovered(primary, start, time.Now(), reprocessed)
	return Rebuilt{Now: time.Now()}, nil
}

// ---- the steps of one batch ----

func (c *coordinator) waitUntil(ctx context.Context, at time.Time) (Event, error) {
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
	wait:
		for {
			select {
			case <-t.C:
				break wait
			case <-c.deathCh:
				if c.anyDead() {
					return WorkerLost{Now: time.Now()}, nil
				}
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Tick{Now: time.Now()}, nil
}

// plan decides the end position of every partition for batch n: what the
// readers hold now, at most MaxBatchRecords in total.
func (c *coordinator) plan(n int64, ahead bool) (Event, error) {
	t0 := time.Now()
	if e := c.replayed(n); e != nil {
		// Batch n ran before a fallback: it runs again as logged.
		if ahead {
			c.next = &aheadPlan{e: e, planStart: t0}
			return Planned{}, nil
		}
		c.cur, c.curRerun, c.curAhead, c.capped = e, false, false, false
		c.planStart = t0
		c.steps = stepTotals{}
		return Planned{}, nil
	}
	nparts := len(c.topo.parts)
	// Planned ahead, batch n follows the batch in flight, not the
	// committed one.
	ends, tracker, wm := c.ends, c.tracker, c.wm
	if ahead {
		if c.cur == nil || c.cur.Batch != n-1 {
			return nil, fmt.Errorf("internal error: batch %d planned ahead with no batch %d in flight", n, n-1)
		}
		ends = make([]int64, nparts)
		for i, r := range c.cur.Ranges {
			ends[i] = r.End
		}
		tracker, wm = c.cur.Tracker, c.cur.Watermark
	}
	avail := make([]int64, nparts)
	eofAt := make([]int64, nparts)
	var total int64
	for _, w := range c.workers {
		for _, r := range w.readers {
			pos, eof, err := r.q.available()
			if err != nil {
				return nil, err
			}
			g := r.part.global
			avail[g] = max(0, pos-ends[g])
			eofAt[g] = -1
			if eof {
				eofAt[g] = pos
			}
			total += avail[g]
		}
	}
	if c.opts.hooks.evenPlans && c.opts.maxBatch > 0 {
		share := (c.opts.maxBatch + int64(nparts) - 1) / int64(nparts)
		for g := range avail {
			if eofAt[g] < 0 && avail[g] < share {
				return Planned{Empty: true}, nil
			}
		}
	}
	take := avail
	capped := false
	if lim := c.opts.maxBatch; lim > 0 && total > lim {
		take = fairShare(avail, lim)
		capped = true
	}
	tr := eventtime.NewTracker(nparts, c.env.Job.Params.MaxDisorder)
	tr.Restore(tracker)
	e := &offsetsEntry{Format: formatVersion, Batch: n, Job: c.env.Job.Name, WatermarkBefore: wm, PlannedUnixNano: t0.UnixNano(),
		Parallelism: c.par}
	var rows int64
	for _, p := range c.topo.parts {
		g := p.global
		start := ends[g]
		end := start + take[g]
		e.Ranges = append(e.Ranges, partRange{Input: p.input, Partition: p.name, Start: start, End: end})
		rows += take[g]
		if end > start {
			if ts := c.workers[p.owner].queueOf(g).maxTS(start, end); ts != operator.NoWatermark {
				tr.ObserveTS(g, ts)
			}
		}
		if eofAt[g] >= 0 && end == eofAt[g] {
			tr.Finish(g)
		}
	}
	e.Tracker = tr.State()
	e.Watermark = operator.NoWatermark
	if c.env.Job.UsesEventTime {
		e.Watermark = tr.Watermark()
	}
	if rows == 0 && allDone(tracker) {
		// Ahead, the batch in flight is not committed yet: the run is
		// done only once a plan after its commit finds nothing.
		return Planned{Done: !ahead, Empty: ahead}, nil
	}
	if rows == 0 && trackerEqual(e.Tracker, tracker) && !c.opts.idleBatches {
		return Planned{Empty: true}, nil
	}
	if ahead {
		c.next = &aheadPlan{e: e, capped: capped, planStart: t0, steps: stepTotals{plan: time.Since(t0)}}
		return Planned{}, nil
	}
	c.cur, c.curRerun, c.curAhead, c.capped = e, false, false, capped
	c.planStart = t0
	c.steps = stepTotals{plan: time.Since(t0)}
	return Planned{}, nil
}

// aheadPlan is a batch planned while the previous one waits for its commit
// entry and publish.
type aheadPlan struct {
	e         *offsetsEntry
	capped    bool
	planStart time.Time
	steps     stepTotals
}

// fairShare splits lim rows over partitions with avail rows each, giving
// every partition an equal share of what it has (water filling).
func fairShare(avail []int64, lim int64) []int64 {
	take := make([]int64, len(avail))
	left := lim
	for left > 0 {
		active := 0
		for i := range avail {
			if take[i] < avail[i] {
				active++
			}
		}
		if active == 0 {
			break
		}
		share := max(1, left/int64(active))
		for i := range avail {
			if left == 0 {
				break
			}
			if d := min(avail[i]-take[i], share, left); d > 0 {
				take[i] += d
				left -= d
			}
		}
	}
	return take
}

func allDone(s eventtime.State) bool {
	for _, d := range s.Done {
		if !d {
			return false
		}
	}
	return true
}

func trackerEqual(a, b eventtime.State) bool {
	return slices.Equal(a.MaxTS, b.MaxTS) && slices.Equal(a.Done, b.Done)
}

// logOffsets writes offsets/n beside the loop: n is the batch in flight,
// or the one planned ahead, whose entry goes beside the commit entry of
// the batch in flight.
func (c *coordinator) logOffsets(ctx context.Context, n int64) (Event, error) {
	t0 := time.Now()
	e := c.cur
	if c.next != nil && c.next.e.Batch == n {
		e = c.next.e
	}
	data, err := encodeEntry(e)
	if err != nil {
		return nil, err
	}
	if err := c.point(PointOffsetsMidWrite); err != nil {
		return nil, err
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.put(ctx, offsetsName(n), data); err != nil {
			return nil, nil, fmt.Errorf("logging offsets of batch %d: %w", n, err)
		}
		d := time.Since(t0)
		return OffsetsLogged{}, func() {
			switch {
			case c.next != nil && c.next.e == e:
				c.next.steps.offsets = d
			case c.cur == e:
				c.steps.offsets = d
			}
		}, nil
	})
	return nil, nil
}

// runBatch runs the finite job over the logged ranges, stage by stage, on
// every worker in parallel. Stages meet at hash exchanges inside the batch;
// nothing crosses the batch boundary except operator state.
func (c *coordinator) runBatch(ctx context.Context, rerun bool) (Event, error) {
	t0 := time.Now()
	if c.curRerun {
		// A re-run after a restart or a lost worker: the plan is the logged
		// one, and its measurement starts now.
		if c.planStart.IsZero() {
			c.planStart = t0
		}
		c.steps = stepTotals{}
	}
	if h := c.opts.hooks.onRun; h != nil {
		h(*c.cur, rerun)
	}
	c.ranStart = true
	bd := newBatchData(c.topo, c.par)
	defer bd.release()
	se := &stageEnv{
		ctx: ctx, topo: c.topo, plan: c.cur, bd: bd, workers: c.par, alloc: c.alloc, faults: c.faults,
		eventTime: c.env.Job.UsesEventTime, midRunDone: make([]bool, c.par), onCrash: c.killWorker,
	}
	for si := range c.topo.stages {
		errs := make([]error, c.par)
		if c.par == 1 {
			errs[0] = c.workers[0].runStage(se, si)
		} else {
			var wg sync.WaitGroup
			for i, w := range c.workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = w.runStage(se, si)
				}()
			}
			wg.Wait()
		}
		if c.anyDead() {
			// Lineage rebuilds the lost pieces and the batch goes on;
			// otherwise the machine rolls it back (lineage.go).
			if ok, err := c.recoverLostPieces(ctx, se, si+1, errs); err != nil || !ok {
				return WorkerLost{Now: time.Now()}, err
			}
		}
		for i, err := range errs {
			switch {
			case errors.Is(err, errWorkerKilled):
				// Only the work of a dead worker stops so, and the repair
				// above clears what a dead worker said. Going on would run
				// the batch without the input the subtask did not take.
				return nil, fmt.Errorf("internal error: batch %d: stage %s of worker %d stopped as killed, but no worker is dead",
					c.cur.Batch, c.topo.stages[si].ID, i)
			case err != nil:
				return nil, err
			}
		}
	}
	c.handover = c.handover[:0]
	c.curRows, c.curOut, c.curLate = 0, 0, 0
	for i := range c.workers {
		c.handover = append(c.handover, bd.handover[i]...)
		c.curRows += bd.rowsIn[i]
		c.curOut += bd.rowsOut[i]
		c.curLate += bd.late[i]
	}
	c.met.addRowsOut(c.curOut)
	c.steps.run = time.Since(t0)
	c.rerunDone(c.steps.run)
	return RunDone{}, nil
}

// parallel runs fns concurrently. After the first one finishes, between
// that write and the others, it passes the crash point `point` (the
// mid-write points); a crash there returns at once, leaving the other
// writes to land or not, as they would in a real crash. The stragglers are
// tracked in c.bg so the teardown waits for them.
func (c *coordinator) parallel(point string, fns []func() error) error {
	if len(fns) == 0 {
		return c.point(point)
	}
	res := make(chan error, len(fns))
	for _, fn := range fns {
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			res <- fn()
		}()
	}
	var first error
	for i := range fns {
		err := <-res
		if err != nil && first == nil {
			first = err
		}
		if i == 0 && first == nil {
			if err := c.point(point); err != nil {
				return err
			}
		}
	}
	return first
}

// commitState writes state version N: per (stage, subtask) the key groups
// that changed, and the manifest. Snapshots are taken and encoded here;
// the writes run beside the loop (concurrently with the sink flush), all at
// once: the manifest need not wait for the objects, because no restart
// reads a version before a commit entry names it, and commits/N waits for
// every write.
func (c *coordinator) commitState(ctx context.Context) (Event, error) {
	t0 := time.Now()
	n := c.cur.Batch
	p := &c.pending
	p.idx, p.version, p.full, p.written, p.rows, p.bytes, p.changedState = c.idx, c.stateVersion, false, 0, 0, 0, false
	var snaps []*stageSnap
	var mu sync.Mutex
	var jobs []func() error
	for si, st := range c.topo.stateful {
		if !st {
			continue
		}
		for _, w := range c.workers {
			jobs = append(jobs, func() error {
				s, err := w.takeSnapshot(si)
				if err != nil {
					return fmt.Errorf("snapshot of stage %s subtask %d: %w", c.topo.stages[si].ID, w.id, err)
				}
				mu.Lock()
				snaps = append(snaps, s)
				mu.Unlock()
				return nil
			})
		}
	}
	err := runAll(jobs)
	defer func() {
		for _, s := range snaps {
			s.release()
		}
	}()
	if err != nil {
		return nil, err
	}
	changed := false
	for _, s := range snaps {
		changed = changed || len(s.changed) > 0 || len(s.deleted) > 0
		p.rows += s.rows
		p.bytes += s.bytes
	}
	if !changed {
		if err := c.point(PointStateMidWrite); err != nil {
			return nil, err
		}
		c.steps.state = time.Since(t0)
		return StateCommitted{Now: time.Now()}, nil
	}
	full := c.lastFull < 0 || n-c.lastFull >= int64(c.opts.fullEvery)
	idx := c.idx.clone()
	if full {
		for id := range idx {
			idx[id] = &[keygroup.Count]string{}
		}
	}
	type write struct {
		name string
		blob []byte
	}
	var writes []write
	// Encode every subtask's key groups in parallel.
	blobs := make([][]byte, len(snaps))
	kgss := make([][]int, len(snaps))
	encs := make([]func() error, len(snaps))
	for i, s := range snaps {
		encs[i] = func() error {
			id := c.topo.stages[s.si].ID
			var err error
			if blobs[i], kgss[i], err = s.encode(id, full); err != nil {
				return fmt.Errorf("encoding state of stage %s subtask %d: %w", id, s.worker.id, err)
			}
			return nil
		}
	}
	if err := runAll(encs); err != nil {
		return nil, err
	}
	for i, s := range snaps {
		id := c.topo.stages[s.si].ID
		blob, kgs := blobs[i], kgss[i]
		a := idx[id]
		if !full {
			for _, kg := range s.deleted {
				a[kg] = ""
			}
		}
		if blob != nil {
			name := stateObjectName(n, id, s.worker.id)
			writes = append(writes, write{name, blob})
			for _, kg := range kgs {
				a[kg] = name
			}
			p.written += int64(len(blob))
		}
		s.worker.fps[s.si] = s.fps
	}
	man, err := encodeEntry(idx.toManifest(n, full))
	if err != nil {
		return nil, err
	}
	manifest := func() error {
		if err := c.put(ctx, manifestName(n), man); err != nil {
			return fmt.Errorf("writing state manifest %d: %w", n, err)
		}
		return nil
	}
	serial := c.opts.hooks.serialSeal
	p.idx, p.version, p.full, p.changedState = idx, n, full, true
	p.written += int64(len(man))
	fns := make([]func() error, len(writes), len(writes)+1)
	for i, wr := range writes {
		fns[i] = func() error {
			if err := c.put(ctx, wr.name, wr.blob); err != nil {
				return fmt.Errorf("writing state object %s: %w", wr.name, err)
			}
			return nil
		}
	}
	if !serial {
		fns = append(fns, manifest)
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.parallel(PointStateMidWrite, fns); err != nil {
			return nil, nil, err
		}
		if serial {
			if err := manifest(); err != nil {
				return nil, nil, err
			}
		}
		now := time.Now()
		return StateCommitted{Now: now}, func() { c.steps.state = now.Sub(t0) }, nil
	})
	return nil, nil
}

func runAll(fns []func() error) error {
	if len(fns) == 1 {
		return fns[0]()
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// flushSink hands batch N to every sink subtask (epoch = batch id), beside
// the loop.
func (c *coordinator) flushSink(ctx context.Context) (Event, error) {
	t0 := time.Now()
	n := c.cur.Batch
	fns := make([]func() error, len(c.workers))
	for i, w := range c.workers {
		wr := w.writer
		fns[i] = func() error {
			if err := wr.Flush(n); err != nil {
				return fmt.Errorf("sink subtask %d: flushing batch %d: %w", i, n, err)
			}
			return nil
		}
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.parallel(PointSinkMidWrite, fns); err != nil {
			return nil, nil, err
		}
		now := time.Now()
		return SinkDone{Now: now}, func() { c.visibleAt, c.steps.sink = now, now.Sub(t0) }, nil
	})
	return nil, nil
}

// logCommit writes commits/N beside the loop (and beside offsets/N+1 when
// the next batch was planned ahead): from then on batch N is done.
func (c *coordinator) logCommit(ctx context.Context) (Event, error) {
	t0 := time.Now()
	n := c.cur.Batch
	p := &c.pending
	e := commitEntry{Format: formatVersion, Batch: n, StateVersion: p.version, InputRows: c.cur.rows(), CommittedUnixNano: t0.UnixNano()}
	data, err := encodeEntry(e)
	if err != nil {
		return nil, err
	}
	if err := c.point(PointCommitMidWrite); err != nil {
		return nil, err
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.put(ctx, commitName(n), data); err != nil {
			return nil, nil, fmt.Errorf("logging commit of batch %d: %w", n, err)
		}
		d := time.Since(t0)
		return CommitLogged{}, func() { c.committedBatch(d) }, nil
	})
	return nil, nil
}

// committedBatch records that commits/N of the batch in flight is durable.
func (c *coordinator) committedBatch(took time.Duration) {
	n := c.cur.Batch
	p := &c.pending
	c.committed = n
	for i, r := range c.cur.Ranges {
		c.ends[i] = r.End
	}
	c.tracker, c.wm = c.cur.Tracker, c.cur.Watermark
	c.idx, c.stateVersion = p.idx, p.version
	if p.full {
		c.lastFull = n
	}
	c.cacheMu.Lock()
	c.commitVer[n] = p.version
	if p.changedState {
		c.manifestMin[n] = minObjectVersion(p.idx, n)
	}
	c.cacheMu.Unlock()
	c.steps.commit = took
}

// publish makes batch N visible at a transactional sink (a no-op for the
// others, whose flush already did), accounts for it, releases its input
// and applies retention.
func (c *coordinator) publish(ctx context.Context) (Event, error) {
	t0 := time.Now()
	n := c.cur.Batch
	if err := c.env.Sink.Commit(n); err != nil {
		return nil, fmt.Errorf("publishing batch %d: %w", n, err)
	}
	now := time.Now()
	if c.env.Sink.Mode() == sink.Transactional || c.visibleAt.IsZero() {
		c.visibleAt = now
	}
	c.met.latency(c.planStart, c.visibleAt, c.handover)
	c.steps.publish = time.Since(t0)
	var wm *int64
	if c.env.Job.UsesEventTime {
		v := c.cur.Watermark
		wm = &v
	}
	c.met.batchCommitted(batchReport{
		batch: n, rerun: c.curRerun, planStart: c.planStart, inputRows: c.curRows, rowsOut: c.curOut, lateRows: c.curLate,
		steps: c.steps, total: time.Since(c.planStart), stateRows: c.pending.rows, stateBytes: c.pending.bytes,
		stateWritten: c.pending.written, stateVersion: c.stateVersion, full: c.pending.full, watermark: wm,
		ranges: c.cur.Ranges, ends: slices.Clone(c.ends), capped: c.capped, plannedAhead: c.curAhead,
	}, now)
	for _, w := range c.workers {
		for _, r := range w.readers {
			r.q.release(c.ends[r.part.global])
		}
	}
	c.cur, c.curRerun, c.curAhead, c.ranStart, c.visibleAt, c.planStart = nil, false, false, false, time.Time{}, time.Time{}
	if a := c.next; a != nil {
		// The batch planned ahead is next.
		c.cur, c.curAhead, c.capped, c.planStart, c.steps = a.e, true, a.capped, a.planStart, a.steps
		c.next = nil
	}
	if c.committed-c.lastGC >= int64(max(1, c.opts.retained/2)) {
		c.lastGC = c.committed
		c.startGC(ctx, Listing{})
	}
	stop := c.opts.maxBatches > 0 && c.met.committedCount() >= c.opts.maxBatches
	return Published{Stop: stop}, nil
}

// finish completes a bounded run: a last retention pass, synchronously, so
// what remains in storage is exactly what the retention keeps.
func (c *coordinator) finish(ctx context.Context) error {
	c.bg.Wait()
	l, err := c.list(ctx)
	if err != nil {
		return err
	}
	return c.retain(ctx, l, c.committed)
}

// startGC applies retention in the background. l is a fresh listing or the
// zero Listing (list again).
func (c *coordinator) startGC(ctx context.Context, l Listing) {
	if !c.gcRunning.CompareAndSwap(false, true) {
		return
	}
	committed := c.committed
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.gcRunning.Store(false)
		if l.StateObjects == nil {
			var err error
			if l, err = c.list(ctx); err != nil {
				return
			}
		}
		// Retention is housekeeping: a failure leaves extra objects, which
		// the next pass removes; it never affects what a restart reads.
		if err := c.retain(ctx, l, committed); err == nil && c.opts.hooks.onRetained != nil {
			c.opts.hooks.onRetained(committed)
		}
	}()
}

// retain deletes what no kept commit can need (RetentionDeletes).
func (c *coordinator) retain(ctx context.Context, l Listing, committed int64) error {
	if committed < 0 {
		return nil
	}
	oldestKept := committed - int64(c.opts.retained) + 1
	oldest := int64(-1)
	for _, id := range l.Commits {
		if id >= oldestKept && id <= committed {
			oldest = id
			break
		}
	}
	if oldest < 0 {
		return nil
	}
	c.cacheMu.Lock()
	ver, ok := c.commitVer[oldest]
	c.cacheMu.Unlock()
	if !ok {
		ce, err := c.readCommit(ctx, oldest)
		if err != nil {
			return err
		}
		ver = ce.StateVersion
		c.cacheMu.Lock()
		c.commitVer[oldest] = ver
		c.cacheMu.Unlock()
	}
	in := RetentionInput{LastCommitted: committed, Keep: c.opts.retained, OldestLiveManifest: ver, MinLiveObject: ver}
	if ver >= 0 {
		c.cacheMu.Lock()
		minObj, ok := c.manifestMin[ver]
		c.cacheMu.Unlock()
		if !ok {
			_, _, m, err := c.readManifest(ctx, ver)
			if err != nil {
				return err
			}
			minObj = m
		}
		in.MinLiveObject = minObj
	}
	for _, name := range RetentionDeletes(l, in) {
		if err := c.store.Delete(ctx, c.prefix+name); err != nil {
			return err
		}
	}
	c.cacheMu.Lock()
	for b := range c.commitVer {
		if b < oldestKept {
			delete(c.commitVer, b)
		}
	}
	for v := range c.manifestMin {
		if v < in.OldestLiveManifest {
			delete(c.manifestMin, v)
		}
	}
	c.cacheMu.Unlock()
	return nil
}

// replaceWorkers starts a new incarnation of each worker in ids, its key
// groups restored from the committed state version. A killed worker starts
// from nothing; one still alive hands its readers over to the new one.
func (c *coordinator) replaceWorkers(ctx context.Context, ids []int) error {
	needKG := map[int]bool{}
	for _, id := range ids {
		rg := keygroup.RangeFor(id, c.par)
		for kg := rg.Start; kg < rg.End; kg++ {
			needKG[kg] = true
		}
	}
	ls, err := loadState(ctx, c.store, c.prefix, c.idx, func(_ string, kg int) bool { return needKG[kg] }, c.alloc)
	if err != nil {
		return fmt.Errorf("restoring state version %d: %w", c.stateVersion, err)
	}
	defer ls.release()
	for _, id := range ids {
		var keep *worker
		if old := c.workers[id]; !old.dead() {
			keep = old
		}
		w, err := c.newWorker(ctx, id, ls, keep)
		if err != nil {
			return err
		}
		c.wmu.Lock()
		c.workers[id] = w
		c.wmu.Unlock()
		c.startReaders(ctx, w)
	}
	return nil
}

// takeRecoveries clears the crashes pending repair and returns the first,
// which the repair under way bills (nil if none).
func (c *coordinator) takeRecoveries() *recovery {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	recs := c.pendingRecoveries
	c.pendingRecoveries = nil
	if len(recs) == 0 {
		return nil
	}
	return recs[0]
}

// takeDeaths consumes the death notification the repair under way handles
// and records, for the bill of each crash pending, how far the readers had
// read (what the recovery will read again).
func (c *coordinator) takeDeaths() {
	select {
	case <-c.deathCh:
	default:
	}
	hw, _, _, _ := c.status()
	c.recMu.Lock()
	for _, rec := range c.pendingRecoveries {
		c.met.setHighWater(rec, hw)
	}
	c.recMu.Unlock()
}
