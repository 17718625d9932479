package microbatch

// This file holds the steps that run and seal one batch: running the job
// over the logged ranges on every worker, writing the new state version,
// flushing the sink, logging the commit entry and publishing the output,
// and the last steps of a bounded run.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

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
		beforeSourceWait: c.opts.hooks.beforeSourceWait,
		trace:            c.env.Trace, rerun: rerun, reread: make([]bool, c.par),
	}
	c.mark = c.marker()
	se.marker = c.mark
	var seq int64
	if c.proc != nil {
		seq = c.proc.seq.Add(1)
		if err := c.procBegin(ctx, seq); err != nil {
			return nil, err
		}
	}
	for si := range c.topo.stages {
		errs := make([]error, c.par)
		if c.proc != nil {
			errs = c.procStage(ctx, se, si, seq)
		} else if c.par == 1 {
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

// commitState writes state version N: per stage the key groups that
// changed, in one object for all its subtasks, and the manifest. Only the
// hand-over is taken here, while the operators are idle; comparing it with
// the workers' bases, encoding and writing run beside the loop
// (concurrently with the sink flush), the writes all at once: the manifest
// need not wait for the objects, because no restart reads a version before
// a commit entry names it, and commits/N waits for every write.
func (c *coordinator) commitState(ctx context.Context) (Event, error) {
	if c.proc != nil {
		return c.procCommitState(ctx)
	}
	t0 := time.Now()
	var held []*heldSnapshot
	var mu sync.Mutex
	var jobs []func() error
	for si, st := range c.topo.stateful {
		if !st {
			continue
		}
		for _, w := range c.workers {
			jobs = append(jobs, func() error {
				h, err := w.holdSnapshot(si)
				if err != nil {
					return fmt.Errorf("snapshot of stage %s subtask %d: %w", c.topo.stages[si].ID, w.id, err)
				}
				w.sealing.Add(1)
				mu.Lock()
				held = append(held, h)
				mu.Unlock()
				return nil
			})
		}
	}
	if err := runAll(jobs); err != nil {
		for _, h := range held {
			h.release()
			h.worker.sealing.Done()
		}
		return nil, err
	}
	v := &versionWrite{n: c.cur.Batch, held: held, mark: c.mark, lastFull: c.lastFull, pending: pendingVersion{
		idx: c.idx, version: c.stateVersion, deltaBytes: c.deltaBytes}}
	c.goAsync(func() (Event, func(), error) {
		if err := c.writeVersion(ctx, v); err != nil {
			return nil, nil, err
		}
		now := time.Now()
		return StateCommitted{Now: now}, func() { c.pending, c.steps.state = v.pending, now.Sub(t0) }, nil
	})
	return nil, nil
}

// fullVersion says whether version n, whose state the pending snapshots
// measured (p), is a full snapshot rather than deltas; lastFull is the
// last full one.
func (c *coordinator) fullVersion(n, lastFull int64, p *pendingVersion) bool {
	return lastFull < 0 || p.deltaBytes >= p.bytes*max(1, c.opts.hooks.fullAfterDeltas) || n-lastFull >= int64(c.opts.fullEvery)
}

// pendingManifest makes the pending version p version n of index idx
// (full, or deltas of deltas bytes on top of the last full one) and
// returns its manifest, encoded.
func pendingManifest(p *pendingVersion, idx stateIndex, n int64, full bool, deltas int64) ([]byte, error) {
	if full {
		p.deltaBytes = 0
	} else {
		p.deltaBytes += deltas
	}
	man, err := encodeEntry(idx.toManifest(n, full, p.deltaBytes))
	if err != nil {
		return nil, err
	}
	p.idx, p.version, p.full, p.changedState = idx, n, full, true
	p.written += int64(len(man))
	return man, nil
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
	vis := newBatchVisibility(len(c.workers))
	c.visible = vis
	for i, w := range c.workers {
		wr := w.writer
		fns[i] = func() error {
			if err := vis.flush(wr, n); err != nil {
				return fmt.Errorf("sink subtask %d: flushing batch %d: %w", i, n, err)
			}
			return nil
		}
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.parallel(PointSinkMidWrite, fns); err != nil {
			return nil, nil, err
		}
		// Every subtask has flushed batch N, and commits/N waits for this
		// event: the sink's record of the batch's files (see
		// sink.Sink.Record) is made durable here, beside the state writes,
		// rather than before the commit entry, one write after the other.
		if err := c.env.Sink.Record(n); err != nil {
			return nil, nil, fmt.Errorf("recording the sink's files of batch %d: %w", n, err)
		}
		now := time.Now()
		return SinkDone{Now: now}, func() { c.steps.sink = now.Sub(t0) }, nil
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
		// The sink's record of the batch's files is already durable: the
		// sink flush made it (flushSink).
		if err := c.put(ctx, commitName(n), data); err != nil {
			return nil, nil, fmt.Errorf("logging commit of batch %d: %w", n, err)
		}
		d := time.Since(t0)
		c.env.Trace.Record(spacetime.Event{Kind: spacetime.Commit, Lane: coordinatorLane, Worker: -1, ID: n})
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
	for _, w := range c.workers {
		w.changesDurable()
	}
	if c.proc != nil {
		c.procDurable()
	}
	if p.changedState {
		c.deltaBytes = p.deltaBytes
	}
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
	if c.env.Sink.Mode() == sink.Transactional || c.visible == nil {
		c.met.latency(c.planStart, now, c.handover)
	} else {
		// Visible when the last subtask's rows are, which a rolling sink
		// may report later; the hand-overs are kept for then.
		planned, hs := c.planStart, slices.Clone(c.handover)
		c.visible.whenVisible(func(at time.Time) { c.met.latency(planned, at, hs) })
	}
	c.steps.publish = time.Since(t0)
	var wm *int64
	if c.env.Job.UsesEventTime {
		v := c.cur.Watermark
		wm = &v
	}
	c.met.batchCommitted(batchReport{
		batch: n, rerun: c.curRerun, planStart: c.planStart, inputRows: c.curRows, rowsOut: c.curOut, lateRows: c.curLate,
		steps: c.steps, total: time.Since(c.planStart), stateRows: c.pending.rows, stateBytes: c.pending.bytes,
		stateWritten: c.pending.written, stateChanged: c.pending.changedRows, stateVersion: c.stateVersion, full: c.pending.full, watermark: wm,
		ranges: c.cur.Ranges, ends: slices.Clone(c.ends), capped: c.capped, plannedAhead: c.curAhead,
	}, now)
	for _, w := range c.workers {
		for _, r := range w.readers {
			r.q.release(c.ends[r.part.global])
		}
	}
	for _, p := range c.topo.parts {
		p.series.Done(p.index, c.ends[p.global])
	}
	c.cur, c.curRerun, c.curAhead, c.ranStart, c.visible, c.planStart = nil, false, false, false, nil, time.Time{}
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
