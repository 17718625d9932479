package microbatch

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// coordinator is one incarnation of the coordinating process. It is built
// from durable storage, the (re-opened) sources and the sink only, and all
// of its memory, and its workers' memory, is dropped when it crashes: the
// next incarnation is a new value that never sees this one.
type coordinator struct {
	env   *run.Env
	opts  *options
	store storage.Store
	// counted is store, counting what it read: a restore bills the bytes
	// read between its start and end (restore_bytes).
	counted *storage.Counting
	prefix  string
	topo    *topology
	par     int
	alloc   memory.Allocator
	m       *Machine
	met     *metrics
	// mark is the current batch's marker (trace --teach
	// marker-in-microbatch only; nil otherwise).
	mark    *batchMarker
	faults  *fault.Injector
	attempt int // sink writer attempt numbers handed out
	// proc is the run's worker processes (--workers process; nil: the
	// workers are simulated here), and procFatal a death the run cannot
	// repair (too many of them on their own).
	proc      *procRun
	procFatal atomic.Pointer[error]

	// workers is written only by the coordinator goroutine, under wmu;
	// reader goroutines read it under wmu to carry out a worker kill.
	wmu     sync.Mutex
	workers []*worker
	deathCh chan struct{}
	// pendingRecoveries are worker crashes not yet repaired.
	recMu             sync.Mutex
	pendingRecoveries []pendingCrash

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
	deltaBytes   int64 // written by the deltas since lastFull
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
	visible   *batchVisibility // when its rows are visible (append)
	ranStart  bool             // the current attempt's run has begun (for the bill)
	pending   pendingVersion

	// rerunReport is the lost-piece bill of a rerun-batch recovery, until
	// the re-run has run (lineage.go).
	rerunReport *lostPieceReport
}

// pendingVersion is the state version of the batch being sealed, until
// its commit entry makes it the coordinator's (committedBatch).
type pendingVersion struct {
	idx          stateIndex
	version      int64
	full         bool
	written      int64
	rows, bytes  int64
	changedRows  int64 // new or changed entries
	deltaBytes   int64 // c.deltaBytes once this version is committed
	changedState bool
}

func newCoordinator(env *run.Env, opts *options, runID string, incarnation int, met *metrics) (*coordinator, error) {
	topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
	if err != nil {
		return nil, err
	}
	for _, p := range topo.parts {
		p.series = env.SeriesInput(p.input)
	}
	counted := storage.NewCounting(env.PatientStore().Store())
	c := &coordinator{
		env: env, opts: opts, store: counted, counted: counted, prefix: runPrefix(env.Job.Name, runID), topo: topo,
		par: opts.parallelism, alloc: env.Alloc, m: NewMachine(opts.trigger), met: met, faults: env.Faults,
		attempt: incarnation * 10000, deathCh: make(chan struct{}, 1), async: make(chan asyncResult, 2),
		commitVer: map[int64]int64{}, manifestMin: map[int64]int64{}, lastGC: -1,
	}
	if c.alloc == nil {
		c.alloc = memory.DefaultAllocator
	}
	declareLanes(env.Trace, topo, opts.parallelism)
	c.m.lateOffsets = opts.hooks.lateOffsets
	c.m.noAhead = opts.hooks.noPlanAhead
	return c, nil
}

// run restores from durable storage and drives the protocol until the
// bounded input is committed, ctx is done, or the coordinator crashes (a
// *fault.Crash error).
func (c *coordinator) run(ctx context.Context, crashed *recovery, reprocessed int64) error {
	// A crashed coordinator is replaced like a worker: detected, then
	// acquired, then restored.
	var waited *report.Crash
	restoreStart := time.Now()
	if crashed != nil {
		waited = &report.Crash{At: crashed.At}
		restoreStart = c.env.Replacement().Wait(ctx, waited, restoreStart)
	}
	read := c.stateRead()
	rp, err := c.restore(ctx)
	if err != nil {
		return err
	}
	restored := time.Now()
	if crashed != nil && len(crashed.highWater) == len(c.ends) {
		// Every reader starts again at the committed positions.
		reprocessed = c.reprocessedRecords(crashed.highWater, func(int) bool { return true }, false)
	}
	if tr := c.env.Trace; tr != nil && (crashed != nil || c.env.Config.Resumed) {
		tr.Record(spacetime.Event{Kind: spacetime.Restore, Lane: coordinatorLane, Worker: -1, ID: rp.LastCommitted, Note: "new coordinator"})
	}
	c.met.restoredFrom(rp.LastCommitted, c.ends)
	c.met.recovered(oneOf(crashed), nil, waited, restoreStart, restored, reprocessed, c.stateRead()-read)
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
		// The actions are the machine's buffer: exec never steps it, so
		// they stay valid through this loop.
		for _, a := range c.m.Step(ev) {
			if f, ok := a.(Fail); ok {
				return f.Err
			}
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
// fired, every later point returns it: a dead process reaches no point. A
// worker kill that fires here (at-point, or after-point once its records
// are read) kills that worker as a kill at a read does; the coordinator
// goes on.
func (c *coordinator) point(name string) error {
	c.crashMu.Lock()
	if c.crash != nil {
		defer c.crashMu.Unlock()
		return c.crash
	}
	err := c.faults.Point(name, fault.Coordinator)
	cr, ok := fault.AsCrash(err)
	if ok && cr.Worker != fault.Coordinator {
		c.crashMu.Unlock()
		c.killWorker(cr)
		return nil
	}
	if ok {
		c.crash = err
	}
	c.crashMu.Unlock()
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
	if c.proc != nil {
		highWater = c.proc.positions()
	}
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
// held is released and never looked at again. Worker processes of a
// crashed coordinator are killed (the next one replaces them), as a
// crash drops its simulated workers' memory.
func (c *coordinator) close(crashed bool) {
	c.wmu.Lock()
	ws := c.workers
	c.workers = nil
	c.wmu.Unlock()
	if c.proc != nil {
		for id := range c.par {
			if l := c.proc.current(id); l != nil && l.coord.CompareAndSwap(c, nil) {
				l.shell.Store(nil)
			}
			if crashed {
				c.procKill(id)
			}
		}
	}
	for _, w := range ws {
		if w != nil {
			w.teardown()
		}
	}
	c.bg.Wait()
}
