package microbatch

// This file holds the coordinator's side of a restart: reading the
// committed batch, its offsets and state manifest back from storage
// (restore, readCommit, readOffsets, readManifest), and the thin
// get/put/list wrappers that scope every object name to the run's prefix.

import (
	"context"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

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
	c.stateVersion, c.lastFull, c.deltaBytes = -1, -1, 0
	c.idx = stateIndex{}
	for si, st := range c.topo.stateful {
		if st {
			c.idx[c.topo.stages[si].ID] = &[keygroup.Count][]string{}
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
			c.deltaBytes = pt.deltaBytes
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

func (c *coordinator) readManifest(ctx context.Context, v int64) (idx stateIndex, me *manifestEntry, minObj int64, err error) {
	data, err := c.get(ctx, manifestName(v))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("reading state manifest %d: %w", v, err)
	}
	me, err = decodeManifest(data)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("state manifest %d: %w", v, err)
	}
	if me.Version != v {
		return nil, nil, 0, fmt.Errorf("state manifest %d holds version %d", v, me.Version)
	}
	idx, err = me.index(checkStateObjectName)
	if err != nil {
		return nil, nil, 0, err
	}
	for si, st := range c.topo.stateful {
		id := c.topo.stages[si].ID
		if st && idx[id] == nil {
			idx[id] = &[keygroup.Count][]string{}
		}
	}
	for id := range idx {
		if si, ok := c.topo.index[id]; !ok || !c.topo.stateful[si] {
			return nil, nil, 0, fmt.Errorf("state manifest %d holds stage %q, which is not a stateful stage of job %s", v, id, c.env.Job.Name)
		}
	}
	minObj = minObjectVersion(idx, v)
	c.cacheMu.Lock()
	c.manifestMin[v] = minObj
	c.cacheMu.Unlock()
	return idx, me, minObj, nil
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
