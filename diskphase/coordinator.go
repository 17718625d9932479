package diskphase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// execution is one Run. It plays the cluster manager (it starts a
// coordinator, replaces workers that die, and starts a brand-new
// coordinator when one crashes) and the measuring harness. A coordinator
// incarnation recovers from durable storage alone; nothing here is handed
// to it except the configuration any process would be started with.
type execution struct {
	env *run.Env
	// store is env.Store waiting out an outage (run.Env.PatientStore): a
	// unit's write or a ledger entry waits for storage that stopped
	// answering, up to the run's limit.
	store storage.Store
	// counted is store, counting what it read: a coordinator's restart
	// bills the bytes it read back (restore_bytes).
	counted     *storage.Counting
	topo        *topology
	splits      []split
	plan        RunPlan
	mcfg        machineConfig
	names       names
	compression Compression
	readBatch   int
	chunkRows   int // Options.ChunkRows, or DefaultChunkRows
	met         *metrics
	handover    *handoverLog
	trace       func(traceEvent)

	// coordCrash is the bill of the last coordinator crash, completed by
	// the next incarnation once it knows what was lost.
	coordCrash *coordCrash
	// processDied is the bill of the earlier process's death (--resume),
	// completed by this process's first coordinator.
	processDied *recoveryRec

	// lost are the lost-piece figures (rebuild.go).
	lost lostPieces

	// procs are the worker processes with --workers process; nil when
	// the workers are simulated in this process.
	procs *run.Fleet

	// shared are the readers of forgetful splits (see input.go).
	sharedMu sync.Mutex
	shared   map[int]*sharedReader
}

type coordCrash struct {
	rec       *recoveryRec
	abandoned []UnitID
}

// coordinator is one coordinator incarnation: the I/O loop around the
// machine. It owns the workers' attempts; when it dies they are abandoned.
type coordinator struct {
	x       *execution
	inc     int
	m       *machine
	msgs    chan any
	live    map[int]*attemptRun // by attempt number
	wg      sync.WaitGroup
	queue   []event
	commitJ int // job being committed, -1 for none
	done    bool
	// kills are worker kills that fired at a coordinator point, carried
	// out by the loop once the action that reached the point is done.
	kills []killRequest
	wms   map[int]int64
}

type attemptRun struct {
	unit   UnitID
	num    int
	worker int
	cancel context.CancelCauseFunc
	dead   bool
	// killedBy is the crash the attempt was cancelled with; the attempt
	// hands it back as its error, which is not a second crash.
	killedBy *fault.Crash
}

type attemptResult struct {
	run *attemptRun
	m   *MapEntry
	r   *ReduceEntry
	err error
	at  time.Time // when the attempt returned
	// killed and detected: a worker process killed by a fault of its own
	// attempt, when SIGKILL was sent and when its connection was seen
	// broken.
	killed, detected time.Time
}

type killRequest struct {
	crash *fault.Crash
	at    time.Time
}

var errCoordinatorGone = errors.New("the coordinator that started this attempt is gone")

// runCoordinators starts coordinators until one finishes the run.
func (x *execution) runCoordinators(ctx context.Context) error {
	for {
		c := &coordinator{x: x, msgs: make(chan any, 64), live: map[int]*attemptRun{}, commitJ: -1, wms: map[int]int64{}}
		err := c.start(ctx)
		if err == nil {
			err = c.loop(ctx)
		}
		crash, isCrash := fault.AsCrash(err)
		if isCrash && crash.Worker >= 0 {
			// Worker crashes never end a coordinator; this would be a bug.
			isCrash = false
			err = fmt.Errorf("worker crash escaped its attempt: %w", err)
		}
		if isCrash {
			at := time.Now()
			rec := x.met.newRecovery(fmt.Sprintf("coordinator crashed at %s", crash.Spec), at, false)
			x.tracef(traceEvent{Kind: "crash", Worker: -1, Detail: crash.Spec.String()})
			abandoned := c.abandoned()
			if c.commitJ >= 0 {
				x.met.mu.Lock()
				rec.commitJob = c.commitJ
				x.met.commitFails++
				x.met.series.Point("finite job", int64(c.commitJ), report.PointFailed)
				x.met.mu.Unlock()
			}
			c.shutdown()
			x.coordCrash = &coordCrash{rec: rec, abandoned: abandoned}
			if x.env.Log != nil {
				x.env.Log.Info("diskphase: coordinator crashed, starting a new one", "crash", crash.Spec.String())
			}
			continue
		}
		c.shutdown()
		if err == nil {
			return x.finalSweep(ctx)
		}
		return err
	}
}

// start is what a new coordinator process does: find its incarnation
// number, rebuild the plan and ledger from durable storage, and bring the
// sink back to the last committed job.
func (c *coordinator) start(ctx context.Context) error {
	x := c.x
	// A crashed coordinator is replaced like a worker: detected, then
	// acquired, then restored from t0.
	t0 := time.Now()
	var waited *report.Crash
	if cc := x.coordCrash; cc != nil {
		waited = &report.Crash{At: cc.rec.At}
		t0 = x.env.Replacement().Wait(ctx, waited, t0)
	}
	read := x.counted.Read()
	store := x.store
	if err := x.checkRunPlan(ctx); err != nil {
		return err
	}
	coords, err := store.List(ctx, x.names.coordDir())
	if err != nil {
		return err
	}
	c.inc = 0
	for _, o := range coords {
		if p := x.names.parse(o.Name); p.kind == objCoord && p.num >= c.inc {
			c.inc = p.num + 1
		}
	}
	if err := store.Put(ctx, x.names.coord(c.inc), nil); err != nil {
		return err
	}
	d, err := x.loadDurable(ctx)
	if err != nil {
		return err
	}
	c.m, err = restore(x.mcfg, c.inc, d)
	var gap HistoryGapError
	if errors.As(err, &gap) {
		return x.historyGap(gap)
	}
	if err != nil {
		return fmt.Errorf("rebuilding the plan from %s: %w", x.names.root, err)
	}
	// The loop's first event: the restored machine says what to do next.
	c.queue = append(c.queue[:0], evStarted{})
	last := int64(-1)
	for j := range d.commits {
		last = max(last, int64(j))
	}
	if err := x.env.Sink.Recover(last); err != nil {
		return err
	}
	if x.coordCrash != nil && last >= 0 {
		// The previous incarnation may have died between a commit and its
		// garbage collection.
		if err := x.sweepCollectable(ctx, int(last)); err != nil {
			return err
		}
	}
	for j, js := range c.m.jobs {
		if js.wmKnown {
			c.wms[j] = js.wm
		}
	}
	if cc := x.coordCrash; cc != nil {
		x.coordCrash = nil
		now := time.Now()
		rec := cc.rec
		bytes := x.counted.Read() - read
		x.met.mu.Lock()
		rec.Detect, rec.Acquire, rec.Modelled = waited.Detect, waited.Acquire, waited.Modelled
		rec.Restore, rec.RestoreBytes = durPtr(now.Sub(t0)), &bytes
		x.met.mu.Unlock()
		for _, u := range cc.abandoned {
			if !c.m.isDone(u) {
				x.met.interrupted(rec, u, true)
				x.tracef(traceEvent{Kind: "abandoned", Unit: u})
			}
		}
		x.met.settle(rec)
		x.met.emit("coordinator_restarted", map[string]any{"incarnation": c.inc,
			"restore_ms": report.Millis(now.Sub(t0))})
		x.tracef(traceEvent{Kind: "restart", Detail: fmt.Sprint(c.inc)})
	}
	if rec := x.processDied; rec != nil {
		x.processDied = nil
		x.met.resumedAt(rec, c.inc, time.Since(t0), x.counted.Read()-read, resumedFrom(d))
	}
	return nil
}

// loop runs the incarnation until the run is done, the context ends, or it
// crashes.
func (c *coordinator) loop(ctx context.Context) error {
	for {
		if err := c.drain(ctx); err != nil {
			return err
		}
		if len(c.kills) > 0 {
			k := c.kills[0]
			c.kills = c.kills[1:]
			if err := c.handle(ctx, k); err != nil {
				return err
			}
			continue
		}
		if c.done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case msg := <-c.msgs:
			if err := c.handle(ctx, msg); err != nil {
				return err
			}
		}
	}
}

// drain feeds the queued events to the machine one at a time and carries
// out the actions of each, which may queue more events, until the queue is
// empty. exec never steps the machine, so the actions (its buffer) stay
// valid while they are carried out.
func (c *coordinator) drain(ctx context.Context) error {
	for len(c.queue) > 0 {
		ev := c.queue[0]
		c.queue = c.queue[1:]
		for _, a := range c.m.Step(ev) {
			if err := c.exec(ctx, a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *coordinator) exec(ctx context.Context, a action) error {
	x := c.x
	switch a := a.(type) {
	case actPersistPlan:
		b, err := json.Marshal(a.Plan)
		if err != nil {
			return err
		}
		if err := x.store.Put(ctx, x.names.jobPlan(a.Plan.Job), b); err != nil {
			return err
		}
		x.met.planned(a.Plan.Job, time.Now())
		if err := c.point(pointAfterPlan); err != nil {
			return err
		}
		c.queue = append(c.queue, evPlanPersisted{Job: a.Plan.Job})
	case actRun:
		c.startAttempt(ctx, a)
	case actRecord:
		if err := c.point(pointBeforeRecord); err != nil {
			return err
		}
		var v any = a.Map
		var lost int64
		if a.Map != nil {
			lost = a.Map.Lost
		} else {
			v = a.Reduce
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := x.store.Put(ctx, x.names.ledger(a.Unit), b); err != nil {
			return err
		}
		x.met.recorded(a.Unit, lost)
		if ev := x.lost.recorded(a.Unit, a.Map, time.Now()); ev != nil {
			x.met.emit("lost_pieces", ev)
		}
		x.tracef(traceEvent{Kind: "recorded", Unit: a.Unit, Attempt: a.Attempt})
		if err := c.point(pointAfterRecord); err != nil {
			return err
		}
		c.queue = append(c.queue, evLedgerRecorded{Unit: a.Unit, Attempt: a.Attempt})
	case actReplaceWorker:
		// The cluster manager starts a fresh worker process at once.
		c.queue = append(c.queue, evWorkerUp{Worker: a.Worker})
	case actPhase:
		x.met.reducePhase(a.Job, time.Now())
		if js := c.m.jobs[a.Job]; js != nil {
			c.wms[a.Job] = js.wm
		}
		if err := c.point(pointPhase); err != nil {
			return err
		}
	case actCommit:
		return c.commit(ctx, a)
	case actCollect:
		return c.collect(ctx, a.Job)
	case actDone:
		c.done = true
	case actFail:
		return a.Err
	default:
		return fmt.Errorf("unknown action %T", a)
	}
	return nil
}

func (c *coordinator) startAttempt(ctx context.Context, a actRun) {
	x := c.x
	actx, cancel := context.WithCancelCause(ctx)
	r := &attemptRun{unit: a.Unit, num: a.Attempt, worker: a.Worker, cancel: cancel}
	c.live[a.Attempt] = r
	rerun, rec := x.met.attemptStarted(a.Unit, time.Now())
	x.tracef(traceEvent{Kind: "start", Unit: a.Unit, Attempt: a.Attempt, Worker: a.Worker, Rerun: rerun})
	at := &attempt{x: x, unit: a.Unit, num: a.Attempt, worker: a.Worker, rerun: rerun, rec: rec,
		kill: func(cr *fault.Crash) { c.msgs <- killRequest{crash: cr, at: time.Now()} }}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		res := attemptResult{run: r}
		switch {
		case x.procs != nil:
			x.runRemote(actx, at, a, &res)
		case a.Map != nil:
			res.m, res.err = at.runMap(actx, a.Map)
		default:
			res.r, res.err = at.runReduce(actx, a.Reduce)
		}
		detail := "ok"
		if res.err != nil {
			detail = res.err.Error()
		}
		x.tracef(traceEvent{Kind: "ended", Unit: a.Unit, Attempt: a.Attempt, Worker: a.Worker, Detail: detail})
		res.at = time.Now()
		c.msgs <- res
	}()
}

// workerOf returns the live attempt on worker w.
func (c *coordinator) workerOf(w int) *attemptRun {
	for _, r := range c.live {
		if r.worker == w && !r.dead {
			return r
		}
	}
	return nil
}

func (c *coordinator) handle(ctx context.Context, msg any) error {
	x := c.x
	switch msg := msg.(type) {
	case killRequest:
		w := msg.crash.Worker
		r := c.workerOf(w)
		cause := fmt.Sprintf("worker %d killed (%s)", w, msg.crash.Spec)
		if r != nil {
			cause += " while running " + r.unit.String()
		} else {
			cause += " while idle"
		}
		at, detected := msg.at, time.Time{}
		if x.procs != nil {
			var err error
			if at, detected, err = x.procs.Kill(w); err != nil {
				return err
			}
		}
		rec, err := c.workerDown(ctx, cause, w, at, detected)
		if err != nil {
			return err
		}
		x.tracef(traceEvent{Kind: "crash", Worker: w, Detail: msg.crash.Spec.String(), At: rec.At})
		if r == nil {
			x.met.settle(rec)
			c.queue = append(c.queue, evWorkerLost{Worker: w})
			return nil
		}
		c.killed(r, msg.crash, rec)
	case attemptResult:
		r := msg.run
		delete(c.live, r.num)
		if r.dead {
			// A killed worker's late words. A fault that fired in it
			// still happened: count it, it interrupts nothing more.
			c.lateCrash(r, msg.err)
			return nil
		}
		crash, isCrash := fault.AsCrash(msg.err)
		died, hasDied := asDied(msg.err)
		var bad *fileBadError
		switch {
		case msg.err == nil:
			c.queue = append(c.queue, evAttemptSucceeded{Unit: r.unit, Attempt: r.num, Map: msg.m, Reduce: msg.r})
		case isCrash:
			at := msg.at
			if !msg.killed.IsZero() {
				at = msg.killed
			}
			rec, err := c.workerDown(ctx, fmt.Sprintf("worker %d crashed at %s while running %s", r.worker, crash.Spec, r.unit), r.worker, at, msg.detected)
			if err != nil {
				return err
			}
			x.tracef(traceEvent{Kind: "crash", Worker: r.worker, Detail: crash.Spec.String(), At: rec.At})
			c.killed(r, crash, rec)
		case hasDied:
			// A worker process that died on its own (a panic, the OOM
			// killer) is a crash like an injected one.
			if err := x.procs.LostOnItsOwn(died.killed, died); err != nil {
				return err
			}
			rec, err := c.workerDown(ctx, fmt.Sprintf("%v while running %s", died, r.unit), r.worker, died.killed, died.detected)
			if err != nil {
				return err
			}
			x.tracef(traceEvent{Kind: "crash", Worker: r.worker, Detail: died.Error(), At: rec.At})
			c.killed(r, nil, rec)
		case errors.As(msg.err, &bad):
			rec := x.met.newRecovery(fmt.Sprintf("%s, found by %s", bad.Error(), r.unit), time.Now(), true)
			x.met.interrupted(rec, bad.producer, false)
			x.met.lossRerun()
			x.tracef(traceEvent{Kind: "lost", Unit: bad.producer, Detail: bad.file})
			// The unit that found the damage stops and runs again once the
			// producer has: an interruption, though not a crash.
			x.met.interrupted(rec, r.unit, true)
			x.tracef(traceEvent{Kind: "interrupted", Unit: r.unit, Attempt: r.num, Worker: r.worker, Detail: "input lost"})
			producer, err := c.planLostFile(bad)
			if err != nil {
				return err
			}
			c.queue = append(c.queue, evFileBad{Unit: r.unit, Attempt: r.num, Producer: producer, File: bad.file})
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			c.queue = append(c.queue, evAttemptFailed{Unit: r.unit, Attempt: r.num, Err: msg.err})
		}
	default:
		return fmt.Errorf("unknown message %T", msg)
	}
	return nil
}

// lateCrash counts a fault that fired in an attempt already given up.
func (c *coordinator) lateCrash(r *attemptRun, err error) {
	crash, ok := fault.AsCrash(err)
	if !ok || (r != nil && r.killedBy == crash) {
		return
	}
	rec := c.x.met.newRecovery(fmt.Sprintf("worker %d crashed at %s after its attempt was already abandoned", crash.Worker, crash.Spec), time.Now(), false)
	c.x.met.settle(rec)
	c.x.tracef(traceEvent{Kind: "crash", Worker: crash.Worker, Detail: crash.Spec.String()})
}

// abandoned lists the units a crash of this coordinator interrupts: those
// with an attempt really running, and those whose success has not reached
// the ledger yet.
func (c *coordinator) abandoned() []UnitID {
	var out []UnitID
	seen := map[UnitID]bool{}
	for _, r := range c.live {
		if !r.dead && !seen[r.unit] {
			seen[r.unit] = true
			out = append(out, r.unit)
		}
	}
	for _, u := range c.m.inFlight() {
		if mu := c.m.unit(u); mu.status == stFinishing && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// killed carries out the death of the worker running r: the attempt is
// cancelled and whatever it held is dropped with it.
// replace waits out the modelled detect and acquire of the worker crash
// billed in rec (run.Env.Replacement), which the coordinator notices now,
// and bills them. The surviving workers run on meanwhile; their results
// wait for the coordinator. The restore, up to the first re-run of a unit
// the crash interrupted, counts from the end of the wait (attemptStarted).
// It reads no recovery point back: the ledger is in the coordinator's
// memory, so a worker crash has no restore_bytes.
func (c *coordinator) replace(ctx context.Context, rec *recoveryRec) {
	waited := &report.Crash{At: rec.At}
	c.x.env.Replacement().Wait(ctx, waited, time.Now())
	c.x.met.mu.Lock()
	rec.Detect, rec.Acquire, rec.Modelled = waited.Detect, waited.Acquire, waited.Modelled
	c.x.met.mu.Unlock()
}

func (c *coordinator) killed(r *attemptRun, crash *fault.Crash, rec *recoveryRec) {
	r.dead, r.killedBy = true, crash
	r.cancel(crash)
	c.x.met.interrupted(rec, r.unit, true)
	// Stamped at the death, not now: with worker processes the recovery
	// (detect, a replacement's start) has already been waited for here.
	c.x.tracef(traceEvent{Kind: "interrupted", Unit: r.unit, Attempt: r.num, Worker: r.worker, At: rec.At})
	c.queue = append(c.queue, evAttemptCrashed{Unit: r.unit, Attempt: r.num, Worker: r.worker})
}

// shutdown ends the incarnation: every attempt it started is cancelled and
// waited for, so no attempt of a dead coordinator writes after it.
func (c *coordinator) shutdown() {
	for _, r := range c.live {
		r.dead = true
		r.cancel(errCoordinatorGone)
	}
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	for {
		select {
		case msg := <-c.msgs:
			switch m := msg.(type) {
			case killRequest:
				// The fault fired while everything was being torn down:
				// its worker was dying anyway.
				c.lateCrash(nil, m.crash)
			case attemptResult:
				c.lateCrash(m.run, m.err)
			}
		case <-done:
			return
		}
	}
}
