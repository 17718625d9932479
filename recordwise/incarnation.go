package recordwise

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// incarnation is one attempt at running the job: every task, channel,
// operator, reader, sink writer and the coordinator of that attempt. It is
// built only from durable storage, the re-opened sources and the sink (see
// newIncarnation); the run loop drops it whole when any of its workers or
// its coordinator dies. Nothing in it is ever handed to the next
// incarnation, which is what makes it impossible for restored code to read
// pre-crash memory: the next one has no reference to this one.
type incarnation struct {
	*shared
	attempt int

	ctx          context.Context
	cancel       context.CancelFunc
	workerCtx    []context.Context
	workerCancel []context.CancelFunc
	coordCtx     context.Context
	coordCancel  context.CancelFunc

	wg      sync.WaitGroup
	tasks   []*task
	byChain [][]*task
	queues  []*queue
	coord   *coordLoop
	from    checkpoint.ID // restored recovery point; 0 = the start
	// fromParts are the parts listed in the restored point's metadata.
	fromParts []metaPart
	// restoreBytes is what loading the restored point read from storage.
	restoreBytes int64
	// firstEpoch is the sink epoch the restored tasks write first: after
	// from, and after every epoch the sink already published.
	firstEpoch int64
	// published are the visible rows of the sink epochs in replayed (only
	// after a fallback past a committed recovery point); the sink tasks drop
	// their replays. replayed is written into every recovery point this
	// incarnation takes, so a later restore from one of them still drops
	// them (see reconcilePublished).
	published *publishedRows
	replayed  []epochSpan

	// What the start found and chose, and the read positions it resumed
	// from (input/partition -> offset), for the observer.
	listing     checkpoint.Listing
	rplan       checkpoint.RestorePlan
	partCounts  map[checkpoint.ID]int
	restoredPos map[string]int64

	// abandoned holds the checkpoints the coordinator gave up, so part
	// writers still running for them stop instead of leaving orphans.
	abandonedMu sync.Mutex
	abandoned   map[checkpoint.ID]bool
	// ckCtx cancels the part writes of a checkpoint when it is abandoned,
	// so the writes of a checkpoint given up on a storage stall do not
	// pile up behind the next ones.
	ckCtx map[checkpoint.ID]ckCancel

	outMu   sync.Mutex
	outcome *outcome
	done    chan struct{}

	// side is this incarnation's part in a worker process (procworker.go);
	// nil in the coordinator. publishedRaw are the rows published holds,
	// for the worker processes' sink tasks.
	side         *workerSide
	publishedRaw [][]int64
}

// shared is what every incarnation of one run reads: the environment, the
// resolved options, the plan and the observer. None of it is job state:
// the observer is written to, never read back by the job.
type shared struct {
	env    *run.Env
	opts   *options
	plan   *plan
	mode   barrier.Mode
	runID  string
	prefix string
	obs    *observer
	// patient is the run's clock on storage outages. Restores and the
	// listings of a recovery read through its retrying Store; a part or
	// metadata write makes one attempt (storeOnce): a failed write fails
	// its recovery point and the next one retries, until storage has not
	// answered for the run's limit.
	patient   *storage.Patient
	storeOnce storage.Store
	// proc drives the run's worker processes (--workers process); nil
	// when the tasks run in this process.
	proc *procCoord
	// hookRead counts the records the sources read, and hookNext is the
	// next of hooks.triggerAfter to fire (tests).
	hookMu   sync.Mutex
	hookRead int64
	hookNext int
}

type outcomeKind uint8

const (
	outDone outcomeKind = iota + 1
	outCrash
	outError
)

type outcome struct {
	kind  outcomeKind
	at    time.Time
	cause string
	err   error
}

func (inc *incarnation) settle(o outcome) {
	inc.outMu.Lock()
	defer inc.outMu.Unlock()
	if inc.outcome != nil {
		return
	}
	inc.outcome = &o
	close(inc.done)
}

// crash carries out an injected crash: the named worker's tasks (or the
// coordinator) stop at once; the others keep running until the run loop
// notices (after --detect-delay) and tears everything down.
func (inc *incarnation) crash(cr *fault.Crash, where checkpoint.TaskID) {
	if inc.crashWorker(cr) {
		return // the worker process's broken connection ends the attempt
	}
	now := time.Now()
	who := fmt.Sprintf("worker %d", cr.Worker)
	if cr.Worker < 0 {
		who = "the coordinator"
		inc.coordCancel()
	} else if cr.Worker < len(inc.workerCancel) {
		inc.workerCancel[cr.Worker]()
	}
	cause := fmt.Sprintf("%s killed (%s)", who, cr.Spec)
	if where != "" && cr.Spec.IsWorkerKill() {
		cause = fmt.Sprintf("%s killed (%s, noticed by %s)", who, cr.Spec, where)
	}
	// The trace names the kill, not which task noticed it (timing).
	inc.env.Trace.Add(now, spacetime.Event{Kind: spacetime.Crash, Worker: cr.Worker, Note: fmt.Sprintf("%s killed (%s)", who, cr.Spec)})
	inc.settle(outcome{kind: outCrash, at: now, cause: cause})
}

// fail carries out the failure of a step of task where (or of the
// coordinator, where == ""): a *fault.Crash kills the worker it names,
// anything else fails the job.
func (inc *incarnation) fail(err error, where checkpoint.TaskID) {
	if cr, ok := fault.AsCrash(err); ok {
		inc.crash(cr, where)
		return
	}
	if where != "" {
		err = fmt.Errorf("task %s: %w", where, err)
	}
	inc.settle(outcome{kind: outError, at: time.Now(), err: err})
}

// stop cancels every goroutine of the incarnation and waits for them;
// with worker processes, it also waits until each has stopped its tasks.
func (inc *incarnation) stop() {
	if inc.proc != nil {
		inc.proc.detach(inc)
	}
	inc.cancel()
	inc.wg.Wait()
	if inc.proc != nil {
		inc.proc.stopWorkers(inc.attempt)
	}
}

// teardown releases everything the incarnation holds, after stop: it is
// what the operating system does to a dead worker's memory.
func (inc *incarnation) teardown() {
	var lost int64
	for _, t := range inc.tasks {
		if t.src != nil {
			lost += t.src.release()
		}
		t.release()
	}
	for _, q := range inc.queues {
		for _, it := range q.drain() {
			it.release()
		}
	}
	inc.obs.addLost(lost)
	if inc.coord != nil {
		inc.coord.stopTimers()
	}
}

// newIncarnation restores the newest complete recovery point (if any) and
// builds a fresh set of tasks from it. It starts nothing.
func newIncarnation(ctx context.Context, sh *shared, attempt int) (inc *incarnation, err error) {
	inc = &incarnation{shared: sh, attempt: attempt, done: make(chan struct{})}
	inc.contexts(ctx)
	defer func() {
		if err != nil {
			inc.stop()
			inc.teardown()
		}
	}()

	rp, plan, err := inc.restore(inc.ctx)
	if err != nil {
		return inc, err
	}
	defer rp.release()
	if rp.found {
		inc.from, inc.fromParts, inc.restoreBytes = rp.id, rp.meta.Parts, rp.bytes
	}
	if tr := sh.env.Trace; tr != nil && (attempt > 0 || sh.env.Config.Resumed) {
		id := int64(-1)
		if rp.found {
			id = int64(rp.id)
		}
		tr.Record(spacetime.Event{Kind: spacetime.Restore, Lane: coordinatorLane, Worker: -1, ID: id})
	}
	complete := int64(-1)
	if rp.found {
		complete = int64(rp.id)
	}
	if err := sh.env.Sink.Recover(complete); err != nil {
		return inc, fmt.Errorf("sink recovery to epoch %d: %w", complete, err)
	}
	if err := inc.reconcilePublished(complete, rp.meta.Replayed); err != nil {
		return inc, err
	}
	if sh.proc != nil {
		inc.buildStubs(rp)
	} else {
		if err := inc.build(rp); err != nil {
			return inc, err
		}
		inc.restoredPos = map[string]int64{}
		for _, t := range inc.tasks {
			if t.src != nil {
				for _, pr := range t.src.parts {
					inc.restoredPos[t.src.input+"/"+pr.name] = pr.pos.Offset
				}
			}
		}
	}
	var ids []checkpoint.TaskID
	for _, t := range inc.tasks {
		ids = append(ids, t.id)
	}
	co, err := checkpoint.NewCoordinator(checkpoint.Config{
		Tasks: ids, Timeout: sh.opts.settings.CheckpointTimeout, Retained: sh.opts.settings.RetainedCheckpoints,
		// Checkpoint ids are the sink's epochs: never reuse one the sink
		// already published, even if its metadata is gone from the listing.
		NextID: max(plan.NextID, checkpoint.ID(inc.firstEpoch)), Completed: plan.Complete,
	})
	if err != nil {
		return inc, err
	}
	inc.coord = newCoordLoop(inc, co)
	return inc, nil
}

// contexts makes the incarnation's contexts under ctx: its own, its
// coordinator's and one per worker, each cancelled alone by a crash.
func (inc *incarnation) contexts(ctx context.Context) {
	inc.ctx, inc.cancel = context.WithCancel(ctx)
	inc.coordCtx, inc.coordCancel = context.WithCancel(inc.ctx)
	for range inc.plan.parallelism {
		c, cancel := context.WithCancel(inc.ctx)
		inc.workerCtx = append(inc.workerCtx, c)
		inc.workerCancel = append(inc.workerCancel, cancel)
	}
}

// start launches every goroutine: reader goroutines, tasks, coordinator
// (with worker processes: the attempt on each of them, and the
// coordinator; in a worker process: its tasks and links, and no
// coordinator).
func (inc *incarnation) start() {
	if inc.proc != nil {
		inc.proc.start(inc)
		return
	}
	if inc.side != nil {
		inc.startSide()
	}
	for _, t := range inc.tasks {
		if t.src == nil {
			continue
		}
		for _, pr := range t.src.parts {
			inc.wg.Add(1)
			go readLoop(t.ctx, pr, inc.opts.readRows, t.wake, &inc.wg)
		}
	}
	for _, t := range inc.tasks {
		if t.snk != nil && t.snk.async() {
			inc.wg.Add(1)
			go t.snk.flusher(t.ctx, &inc.wg)
		}
		inc.wg.Add(1)
		go t.run()
	}
	if inc.side == nil {
		inc.wg.Add(1)
		go inc.coord.run()
	}
}

func (inc *incarnation) abandon(id checkpoint.ID) {
	inc.abandonedMu.Lock()
	if inc.abandoned == nil {
		inc.abandoned = map[checkpoint.ID]bool{}
	}
	inc.abandoned[id] = true
	if c, ok := inc.ckCtx[id]; ok {
		c.cancel()
		delete(inc.ckCtx, id)
	}
	inc.abandonedMu.Unlock()
}

type ckCancel struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// checkpointCtx is cancelled when checkpoint id is abandoned.
func (inc *incarnation) checkpointCtx(id checkpoint.ID) context.Context {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	if c, ok := inc.ckCtx[id]; ok {
		return c.ctx
	}
	ctx, cancel := context.WithCancel(inc.ctx)
	if inc.abandoned[id] {
		cancel()
		return ctx
	}
	if inc.ckCtx == nil {
		inc.ckCtx = map[checkpoint.ID]ckCancel{}
	}
	inc.ckCtx[id] = ckCancel{ctx, cancel}
	return ctx
}

// forgetCheckpoints drops the contexts of checkpoints up to id once id is
// complete: its parts are durable, and older ones are complete or
// abandoned.
func (inc *incarnation) forgetCheckpoints(id checkpoint.ID) {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	for k, c := range inc.ckCtx {
		if k <= id {
			c.cancel()
			delete(inc.ckCtx, k)
		}
	}
}

func (inc *incarnation) isAbandoned(id checkpoint.ID) bool {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	return inc.abandoned[id]
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var errNoStore = errors.New("recordwise: no durable storage (--storage)")
