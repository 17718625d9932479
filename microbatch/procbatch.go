package microbatch

// This file is the coordinator's part of a batch whose workers are
// processes (--workers process): the planner's questions to the readers,
// each stage run on every worker process with the hash exchanges going
// straight between them (procmesh.go), the sink written here, and the
// state version written by the workers with its manifest written here.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// everyLive calls fn for every worker at once, and errWorkerKilled is a
// dead worker's error.
func (c *coordinator) everyLive(fn func(w *worker) error) []error {
	errs := make([]error, len(c.workers))
	var wg sync.WaitGroup
	for i, w := range c.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.dead() {
				errs[i] = errWorkerKilled
				return
			}
			errs[i] = fn(w)
		}()
	}
	wg.Wait()
	return errs
}

// onEach calls fn for every worker's process at once; a worker whose
// process is gone gets errWorkerKilled, and its coordinator's worker dies
// with it.
func (c *coordinator) onEach(fn func(w *worker, l *procLink) error) []error {
	return c.everyLive(func(w *worker) error {
		l := w.link
		if l == nil {
			return errWorkerKilled
		}
		err := fn(w, l)
		if err != nil && (errors.Is(err, errPeerGone) || l.broken()) {
			l.lost(w)
			return errWorkerKilled
		}
		return err
	})
}

// firstError is the first error that is not a death.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil && !errors.Is(err, errWorkerKilled) {
			return err
		}
	}
	return nil
}

// askAll sends m to every worker and returns their answers, by worker; a
// dead worker's is empty (and the caller finds it dead).
func (c *coordinator) askAll(ctx context.Context, m procMsg) ([]procMsg, error) {
	answers := make([]procMsg, len(c.workers))
	errs := c.onEach(func(w *worker, l *procLink) error {
		a, err := l.peer.call(ctx, m)
		answers[w.id] = a
		return err
	})
	return answers, firstError(errs)
}

// procAvailable is what the worker processes' readers hold, per
// partition: the read position, and where the partition ended (-1: not).
// A dead worker's partitions hold nothing.
func (c *coordinator) procAvailable(ctx context.Context) (pos, eofAt []int64, err error) {
	n := len(c.topo.parts)
	pos, eofAt = make([]int64, n), make([]int64, n)
	for g := range eofAt {
		pos[g], eofAt[g] = c.ends[g], -1
	}
	var mu sync.Mutex
	errs := c.onEach(func(w *worker, l *procLink) error {
		a, err := l.peer.call(ctx, procMsg{Op: opAvail})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, p := range a.Avail {
			if p.Part < 0 || p.Part >= n || c.topo.parts[p.Part].owner != w.id {
				return fmt.Errorf("worker %d reported partition %d, which it does not read", w.id, p.Part)
			}
			if p.Err != "" {
				return errors.New(p.Err)
			}
			pos[p.Part] = p.Pos
			if p.EOF {
				eofAt[p.Part] = p.Pos
			}
		}
		return nil
	})
	return pos, eofAt, firstError(errs)
}

// procMaxTS is the greatest event time in each range, asked of the
// workers reading them (NoWatermark where a dead worker's were).
func (c *coordinator) procMaxTS(ctx context.Context, ranges []partRange) ([]int64, error) {
	out := make([]int64, len(ranges))
	for g := range out {
		out[g] = operator.NoWatermark
	}
	var mu sync.Mutex
	errs := c.onEach(func(w *worker, l *procLink) error {
		a, err := l.peer.call(ctx, procMsg{Op: opMaxTS, Ranges: ranges})
		if err != nil {
			return err
		}
		if len(a.MaxTS) != len(ranges) {
			return fmt.Errorf("worker %d answered %d event times for %d ranges", w.id, len(a.MaxTS), len(ranges))
		}
		mu.Lock()
		defer mu.Unlock()
		for g, ts := range a.MaxTS {
			if c.topo.parts[g].owner == w.id {
				out[g] = ts
			}
		}
		return nil
	})
	return out, firstError(errs)
}

// procBegin starts attempt seq of the batch in flight on every worker.
func (c *coordinator) procBegin(ctx context.Context, seq int64) error {
	_, err := c.askAll(ctx, procMsg{Op: opBegin, Seq: seq, Plan: c.cur, Rerun: c.curRerun, Peers: c.proc.fleet.Peers()})
	return err
}

// procStage runs stage si of attempt seq on every worker. The sink
// writes here, from the rows the workers sent up; the other stages run in
// the worker processes, which send each other the rows of their hash
// edges directly (procmesh.go), and send the sink's rows up.
func (c *coordinator) procStage(ctx context.Context, se *stageEnv, si int, seq int64) []error {
	st := c.topo.stages[si]
	if st.Kind == job.SinkStage {
		return c.everyLive(func(w *worker) error { return w.runStage(se, si) })
	}
	var mu sync.Mutex
	errs := c.onEach(func(w *worker, l *procLink) error {
		var up *upData
		var upErr error
		var wg sync.WaitGroup
		if c.topo.hasUp(si) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				up, upErr = collectUp(ctx, l.up[si], seq)
			}()
		}
		reply, err := l.peer.call(ctx, procMsg{Op: opStage, Seq: seq, Stage: si})
		wg.Wait()
		if err == nil && reply.Killed {
			err = errWorkerKilled
		}
		if err = errors.Join(err, upErr); err != nil {
			if up != nil {
				up.release()
			}
			if reply.PeerLost > 0 && c.awaitPeerDeath(reply.PeerLost-1) {
				return fmt.Errorf("%w (worker %d: %v)", errPeerDied, w.id, err)
			}
			return err
		}
		c.proc.exchanged.Add(reply.Exchanged)
		mu.Lock()
		defer mu.Unlock()
		bd := se.bd
		if up != nil {
			c.proc.count(up)
			bd.out[si][w.id] = up.out
		}
		bd.rowsIn[w.id] += reply.RowsIn
		bd.late[w.id] += reply.Late
		for _, h := range reply.Handover {
			bd.handover[w.id] = append(bd.handover[w.id], handoverRows{at: time.Unix(0, h[0]), rows: h[1]})
		}
		if st.Kind == job.SourceStage {
			for _, p := range c.topo.parts {
				if rg := c.cur.Ranges[p.global]; p.owner == w.id && p.input == st.Input && rg.End > rg.Start {
					p.series.Took(p.index, rg.Start, rg.End)
				}
			}
		}
		return nil
	})
	return errs
}

// errPeerDied is a worker's stage that stopped because its link to
// another worker broke as that one died: the death rolls the batch back,
// and this worker is not to blame.
var errPeerDied = errors.New("a worker it exchanges with died")

// awaitPeerDeath waits, for a stage that failed because its link to
// worker p broke, until p's death is on record (its own connection
// broke) and marks p dead, so the batch is rolled back as a worker's loss
// rather than failed. A p that still answers past the heartbeat timeout
// is reported false, and the stage's error fails the run: its link broke
// for no death, which nothing here can repair.
func (c *coordinator) awaitPeerDeath(p int) bool {
	if p < 0 || p >= len(c.workers) {
		return false // a worker's answer naming no worker
	}
	l := c.proc.current(p)
	if l == nil {
		return false
	}
	_, timeout := c.env.Config.Heartbeats()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-l.done:
		l.lost(c.workers[p])
		return true
	case <-t.C:
		return false
	}
}

// procCommitState is commitState with the snapshots taken and encoded in
// the worker processes, each writing its own objects beside the loop, and
// the manifest written here. A worker that dies meanwhile ends the
// version: the batch is lost with it (WorkerLost).
func (c *coordinator) procCommitState(ctx context.Context) (Event, error) {
	t0 := time.Now()
	n := c.cur.Batch
	c.pending = pendingVersion{idx: c.idx, version: c.stateVersion, deltaBytes: c.deltaBytes}
	p := &c.pending
	lost := func(err error) (Event, error) {
		if err != nil {
			return nil, err
		}
		evs, err := c.drain()
		return WorkerLost{Now: time.Now(), Finished: evs}, err
	}
	answers, err := c.askAll(ctx, procMsg{Op: opSnapshot})
	if err != nil || c.anyDead() {
		return lost(err)
	}
	snaps := make([][]procSnap, c.par)
	changed := false
	for w, a := range answers {
		snaps[w] = a.Snaps
		for _, s := range a.Snaps {
			changed = changed || s.Changed
			p.rows += s.Rows
			p.bytes += s.Bytes
			p.changedRows += s.ChangedRows
		}
	}
	full := c.fullVersion(n, c.lastFull, p)
	answers, err = c.askAll(ctx, procMsg{Op: opEncode, Batch: n, Full: full, Skip: !changed})
	if err != nil || c.anyDead() {
		return lost(err)
	}
	enc := make([][]procEncoded, c.par)
	for w, a := range answers {
		enc[w] = a.Encoded
	}
	if !changed {
		if err := c.point(PointStateMidWrite); err != nil {
			return nil, err
		}
		c.steps.state = time.Since(t0)
		return StateCommitted{Now: time.Now()}, nil
	}
	idx := c.idx.clone()
	if full {
		for id := range idx {
			idx[id] = &[keygroup.Count][]string{}
		}
	}
	var deltas int64
	for w, es := range enc {
		// A worker names only its own key groups: anything else is a
		// broken peer, refused before it reaches the manifest.
		own := keygroup.RangeFor(w, c.par)
		for _, s := range snaps[w] {
			if bad := foreignGroup(own, s.Deleted); bad >= 0 {
				return nil, fmt.Errorf("worker %d reported key group %d, which it does not hold", w, bad)
			}
		}
		for _, e := range es {
			if e.Stage < 0 || e.Stage >= len(c.topo.stages) || !c.topo.stateful[e.Stage] {
				return nil, fmt.Errorf("worker %d encoded stage %d, which is not a stateful stage", w, e.Stage)
			}
			if bad := max(foreignGroup(own, e.Whole), foreignGroup(own, e.Edited)); bad >= 0 {
				return nil, fmt.Errorf("worker %d encoded key group %d, which it does not hold", w, bad)
			}
			a := idx[c.topo.stages[e.Stage].ID]
			if !full {
				for _, s := range snaps[w] {
					if s.Stage == e.Stage {
						for _, kg := range s.Deleted {
							a[kg] = nil
						}
					}
				}
			}
			if e.Name == "" {
				continue
			}
			if e.Name != workerObjectName(n, c.topo.stages[e.Stage].ID, w) {
				return nil, fmt.Errorf("worker %d named its object %q", w, e.Name)
			}
			for _, kg := range e.Whole {
				a[kg] = []string{e.Name}
			}
			for _, kg := range e.Edited {
				a[kg] = append(slices.Clip(a[kg]), e.Name)
			}
			p.written += e.Bytes
			deltas += e.Bytes
		}
	}
	man, err := pendingManifest(p, idx, n, full, deltas)
	if err != nil {
		return nil, err
	}
	fns := []func() error{func() error {
		if err := c.put(ctx, manifestName(n), man); err != nil {
			return fmt.Errorf("writing state manifest %d: %w", n, err)
		}
		return nil
	}}
	died := false
	var diedMu sync.Mutex
	for _, w := range c.workers {
		l := w.link
		fns = append(fns, func() error {
			_, err := l.peer.call(ctx, procMsg{Op: opPut})
			if err != nil && (errors.Is(err, errPeerGone) || l.broken()) {
				l.lost(w)
				diedMu.Lock()
				died = true
				diedMu.Unlock()
				return nil
			}
			return err
		})
	}
	c.goAsync(func() (Event, func(), error) {
		if err := c.parallel(PointStateMidWrite, fns); err != nil {
			return nil, nil, err
		}
		now := time.Now()
		diedMu.Lock()
		defer diedMu.Unlock()
		if died {
			return WorkerLost{Now: now}, nil, nil
		}
		return StateCommitted{Now: now}, func() { c.steps.state = now.Sub(t0) }, nil
	})
	return nil, nil
}

// foreignGroup is a key group of kgs outside own, or -1.
func foreignGroup(own keygroup.Range, kgs []int) int {
	for _, kg := range kgs {
		if kg < own.Start || kg >= own.End {
			return max(kg, 0)
		}
	}
	return -1
}

// procDurable tells the workers their version is committed (changesDurable).
func (c *coordinator) procDurable() {
	for _, w := range c.workers {
		if l := w.link; l != nil && !w.dead() {
			_ = sendMsg(l.slot.Conn, procMsg{Op: opDurable})
		}
	}
}
