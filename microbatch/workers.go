package microbatch

// This file holds the coordinator's management of its workers: building
// one (its operators restored from a state version, its sink writer and
// readers), starting its readers, killing it, and rebuilding or replacing
// dead workers after a failure.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// newWorker builds worker id: operators restored from ls, the sink writer,
// and (unless keep is given) readers re-opened at the committed positions.
// keep is a surviving worker whose readers and queues are kept.
func (c *coordinator) newWorker(ctx context.Context, id int, ls loadedState, keep *worker) (*worker, error) {
	w := keep
	if w == nil {
		w = &worker{id: id, stop: make(chan struct{})}
	}
	fail := func(err error) (*worker, error) {
		if keep == nil {
			w.teardown()
		}
		return nil, err
	}
	if c.proc != nil {
		// The operators and readers are the process's: it restores them
		// from the committed state version itself.
		wr, err := c.env.Sink.Writer(id, c.attempt)
		c.attempt++
		if err != nil {
			return fail(err)
		}
		w.writer = wr
		if err := c.bindWorker(ctx, w, keep == nil); err != nil {
			return fail(err)
		}
		return w, nil
	}
	spec := opsSpec{topo: c.topo, par: c.par, alloc: c.alloc, version: c.stateVersion, eventTime: c.env.Job.UsesEventTime,
		wm: c.wm, changes: c.usesChanges}
	if err := w.restoreOps(spec, ls); err != nil {
		return fail(err)
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

// opsSpec is what restoring a worker's operators takes besides the state,
// the same in the coordinator and in a worker process.
type opsSpec struct {
	topo  *topology
	par   int
	alloc memory.Allocator
	// version is the state version restored (for the errors).
	version   int64
	eventTime bool
	// wm is the restored batch's watermark, delivered again.
	wm int64
	// changes says whether a stage's versions come from its operator's
	// change hand-over (statechanges.go).
	changes func(operator.Operator) bool
}

// restoreOps builds worker w's operators, its key groups restored from ls
// (nil entries: empty), and the base of its next state version.
func (w *worker) restoreOps(s opsSpec, ls loadedState) error {
	w.ops = make([]operator.Operator, len(s.topo.stages))
	w.releaseBase()
	w.base = make([][keygroup.Count]arrow.RecordBatch, len(s.topo.stages))
	w.usesChanges = make([]bool, len(s.topo.stages))
	w.initChanges(len(s.topo.stages))
	kgs := keygroup.RangeFor(w.id, s.par)
	failEmit := operator.EmitFunc(func(b arrow.RecordBatch) error {
		return fmt.Errorf("restored state emitted %d rows when the watermark of the restored batch was delivered again: state version and watermark disagree", b.NumRows())
	})
	for si, st := range s.topo.stages {
		if st.Kind != job.OperatorStage {
			continue
		}
		op, err := st.New()
		if err != nil {
			return err
		}
		w.ops[si] = op
		octx := operator.Context{Alloc: s.alloc, Subtask: w.id, Parallelism: s.par, KeyGroups: keygroup.All}
		if st.Keyed {
			octx.KeyGroups = kgs
		}
		if err := w.opChain.Open(op, octx, 0); err != nil {
			return fmt.Errorf("opening stage %s subtask %d: %w", st.ID, w.id, err)
		}
		if !s.topo.stateful[si] {
			continue
		}
		if a := ls[st.ID]; a != nil {
			// Only this worker's key groups, also for an unkeyed stage.
			if err := w.opChain.Restore(w.opChain.Len()-1, a[kgs.Start:kgs.End]); err != nil {
				return fmt.Errorf("restoring stage %s subtask %d from state version %d: %w", st.ID, w.id, s.version, err)
			}
		}
		if s.eventTime {
			if err := op.AdvanceWatermark(s.wm, failEmit); err != nil {
				return err
			}
		}
		if err := op.Flush(failEmit); err != nil {
			return err
		}
		// The base of the next delta is the state as storage rebuilds
		// it, in storage's row order: an edit's script addresses rows by
		// position, and the restored operator may snapshot its rows in
		// another order (a hash table of another size). Taking the
		// operator's snapshot here made every edit after a restore
		// address the wrong rows (caught by the edits' checksums, so the
		// next restore fell back past them).
		w.usesChanges[si] = s.changes(op)
		if a := ls[st.ID]; a != nil {
			for kg := kgs.Start; kg < kgs.End; kg++ {
				if b := a[kg].Batch; b != nil && w.usesChanges[si] {
					if w.pbase[si][kg], err = newPatchGroup(b); err != nil {
						return fmt.Errorf("stage %s key group %d of state version %d: %w", st.ID, kg, s.version, err)
					}
				} else if b != nil {
					b.Retain()
					w.base[si][kg] = b
				}
			}
		}
	}
	if s.eventTime {
		for si, op := range w.ops {
			if op == nil || s.topo.stateful[si] {
				continue
			}
			if err := op.AdvanceWatermark(s.wm, failEmit); err != nil {
				return err
			}
		}
	}
	return nil
}

// startReaders starts the read-ahead goroutines of a new worker, once it
// is in its slot (a read can kill any worker).
func (c *coordinator) startReaders(ctx context.Context, w *worker) {
	if w.started {
		return
	}
	if c.proc != nil {
		c.procStartReaders(ctx, w)
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
	if c.proc != nil && cr.Worker >= 0 && cr.Worker < c.par {
		// A real kill: the process dies whatever the coordinator holds.
		defer c.procKill(cr.Worker)
	}
	if cr.Worker < 0 || cr.Worker >= len(c.workers) || c.workers[cr.Worker] == nil {
		// The coordinator is down: the worker is gone already. The fault
		// still counts, and the coordinator's recovery covers it.
		c.met.crash(fmt.Sprintf("worker %d killed (%s) while its coordinator was down", cr.Worker, cr.Spec), time.Now(), nil)
		return
	}
	w := c.workers[cr.Worker]
	cause := fmt.Sprintf("worker %d killed (%s)", cr.Worker, cr.Spec)
	if w.dead() {
		cause += " while already down"
	}
	// The crash is on record before the worker dies: the coordinator may
	// see the death and rebuild at once, and that rebuild must find the
	// crash to bill (it was missed, leaving a crash without a recovery).
	// A second kill of a worker already down is pending too: the repair
	// that replaces the worker repairs it (takeRecoveries).
	r := c.met.crash(cause, time.Now(), nil)
	c.recMu.Lock()
	c.pendingRecoveries = append(c.pendingRecoveries, pendingCrash{r: r, worker: cr.Worker})
	c.recMu.Unlock()
	if w.dead() {
		return
	}
	c.env.Trace.Record(spacetime.Event{Kind: spacetime.Crash, Worker: cr.Worker, Note: cause})
	w.kill()
	select {
	case c.deathCh <- struct{}{}:
	default:
	}
}

// pendingCrash is a worker crash not yet repaired, and the worker it hit.
type pendingCrash struct {
	r      *recovery
	worker int
}

// deadNow names the workers dead at this moment and counts the crashes
// pending at the same moment. A kill holds wmu from its crash record to
// the worker's death, so the two agree: the repair under way replaces
// exactly these workers and repairs exactly these crashes, and a kill
// landing later waits for the next repair unless its worker is replaced
// anyway (takeRecoveries). Scanning the workers at one moment and billing
// the crashes pending at another left a kill landing in between repaired
// but never billed.
func (c *coordinator) deadNow() (dead map[int]bool, pending int) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dead = map[int]bool{}
	for _, w := range c.workers {
		if w.dead() {
			dead[w.id] = true
		}
	}
	c.recMu.Lock()
	defer c.recMu.Unlock()
	return dead, len(c.pendingRecoveries)
}

// killFor kills worker id as a test hook asks (testHooks.onRepair).
func (c *coordinator) killFor(id int) {
	c.killWorker(&fault.Crash{Spec: fault.Spec{Worker: id, Point: "test hook"}, Worker: id})
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
	noticed := time.Now()
	if _, err := c.drain(); err != nil { // nothing is in flight by now
		return nil, err
	}
	c.opts.hooks.midRepair("scan", c.killFor)
	dead, scanned := c.deadNow()
	hw := c.takeDeaths(dead)
	if err := c.procFatal.Load(); err != nil {
		return nil, *err
	}
	var waited *report.Crash
	var start time.Time
	if c.proc != nil && scanned > 0 {
		c.recMu.Lock()
		first := c.pendingRecoveries[0]
		c.recMu.Unlock()
		var err error
		if waited, start, err = c.replaceProcs(ctx, first, dead); err != nil {
			return nil, err
		}
	} else {
		waited, start = c.replacement(ctx, noticed, scanned)
	}
	read := c.stateRead()
	var need []int
	for _, w := range c.workers {
		if dead[w.id] {
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
	switch {
	case r.Failed >= 0:
		reason := fmt.Sprintf("cut short: worker %s died", deadList(dead))
		c.met.batchLost(r.Failed, true, reason)
		traceBatchLost(c.env.Trace, r.Failed, true, reason)
	case r.Discarded >= 0:
		reason := fmt.Sprintf("cut short before its offsets were logged: worker %s died", deadList(dead))
		c.met.batchLost(r.Discarded, false, reason)
		traceBatchLost(c.env.Trace, r.Discarded, false, reason)
	}
	if err := c.replaceWorkers(ctx, need); err != nil {
		return nil, err
	}
	c.opts.hooks.midRepair("replaced", c.killFor)
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
	reprocessed := c.reprocessedRecords(hw, func(w int) bool { return dead[w] }, r.Rollback && r.Failed >= 0)
	repaired, pending := c.takeRecoveries(scanned)
	c.met.recovered(repaired, pending, waited, start, time.Now(), reprocessed, c.stateRead()-read)
	if tr := c.env.Trace; tr != nil {
		note := "replaced the dead workers"
		if r.Rollback {
			note = "rolled back to the committed state"
		}
		if r.Failed >= 0 {
			note += fmt.Sprintf("; batch %d runs again", r.Failed)
		}
		tr.Record(spacetime.Event{Kind: spacetime.Restore, Lane: coordinatorLane, Worker: -1, ID: c.committed, Note: note})
	}
	return Rebuilt{Now: time.Now()}, nil
}

// replacement waits out the modelled detect and acquire of the first crash
// pending repair (run.Env.Replacement), noticed at noticed, and returns
// their figures and the moment the replacement is ready: the restore is
// measured from there. Without a crash among the scanned ones (a rebuild
// for a lost file) there is nothing to wait for.
func (c *coordinator) replacement(ctx context.Context, noticed time.Time, scanned int) (*report.Crash, time.Time) {
	c.recMu.Lock()
	var first *recovery
	if scanned > 0 {
		first = c.pendingRecoveries[0].r
	}
	c.recMu.Unlock()
	if first == nil {
		return nil, noticed
	}
	waited := &report.Crash{At: first.At}
	return waited, c.env.Replacement().Wait(ctx, waited, noticed)
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
	if c.proc != nil {
		needKG = nil // each worker process loads its own
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

// takeRecoveries takes, at the end of a repair, the crashes it repaired:
// the first scanned ones (deadNow), and those that landed since on a
// worker the repair replaced anyway (its worker is alive now). A crash
// whose worker is dead now hit it after its replacement was in place: it
// stays pending, returned in pending, for the next repair, which the
// death starts.
func (c *coordinator) takeRecoveries(scanned int) (repaired, pending []*recovery) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.recMu.Lock()
	defer c.recMu.Unlock()
	var keep []pendingCrash
	for i, p := range c.pendingRecoveries {
		if i < scanned || !c.workers[p.worker].dead() {
			repaired = append(repaired, p.r)
			continue
		}
		keep = append(keep, p)
		pending = append(pending, p.r)
	}
	c.pendingRecoveries = keep
	return repaired, pending
}

// takeDeaths consumes the death notification the repair under way handles
// and records, for the bill of each crash pending, how far the readers had
// read (what the recovery will read again).
func (c *coordinator) takeDeaths(dead map[int]bool) []int64 {
	select {
	case <-c.deathCh:
	default:
	}
	// A killed worker's readers notice the kill on their own time: wait for
	// them, so the positions below are how far they really read (read
	// later, the difference was read again but never billed).
	for _, w := range c.workers {
		if dead[w.id] {
			w.stopReaders()
		}
	}
	hw, _, _, _ := c.status()
	c.recMu.Lock()
	for _, rec := range c.pendingRecoveries {
		c.met.setHighWater(rec.r, hw)
	}
	c.recMu.Unlock()
	return hw
}

// reprocessedRecords is what a repair processes again: every record a
// re-opened reader reads again (it had read up to hw, and the reader
// starts at the committed position), and, when the batch rolls back, the
// batch's records the kept readers hand over again. Counting only the
// rolled-back batch missed the read-ahead of a worker killed between
// batches, which is read again all the same.
func (c *coordinator) reprocessedRecords(hw []int64, reopened func(owner int) bool, rolledBack bool) int64 {
	var n int64
	for _, p := range c.topo.parts {
		switch {
		case reopened(p.owner) && p.global < len(hw):
			n += max(hw[p.global]-c.ends[p.global], 0)
		case rolledBack && c.cur != nil:
			rg := c.cur.Ranges[p.global]
			n += max(rg.End-rg.Start, 0)
		}
	}
	return n
}

// deadList names the dead workers, in order ("0", "0, 1").
func deadList(dead map[int]bool) string {
	ids := slices.Sorted(maps.Keys(dead))
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.Itoa(id)
	}
	return strings.Join(out, ", ")
}
