package microbatch

// This file holds the first steps of one batch: waiting for its start
// time, planning the end position of every partition (fair shares of
// MaxBatchRecords), and logging the planned offsets before the batch runs.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

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
	if c.opts.hooks.onTick != nil {
		c.opts.hooks.onTick()
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
	avail, eofAt, err := c.available(ends)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, a := range avail {
		total += a
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
		e.Ranges = append(e.Ranges, partRange{Input: p.input, Partition: p.name, Start: ends[g], End: ends[g] + take[g]})
		rows += take[g]
	}
	maxTS, err := c.rangesMaxTS(e.Ranges)
	if err != nil {
		return nil, err
	}
	for _, p := range c.topo.parts {
		g := p.global
		end := e.Ranges[g].End
		if ts := maxTS[g]; ts != operator.NoWatermark {
			tr.ObserveTS(g, ts)
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

// available is, per partition, how many records past ends its reader
// holds, and where the partition ended (-1: not yet).
func (c *coordinator) available(ends []int64) (avail, eofAt []int64, err error) {
	n := len(c.topo.parts)
	avail, eofAt = make([]int64, n), make([]int64, n)
	if c.proc != nil {
		pos, eof, err := c.procAvailable(context.Background())
		if err != nil {
			return nil, nil, err
		}
		for g := range avail {
			avail[g], eofAt[g] = max(0, pos[g]-ends[g]), eof[g]
		}
		return avail, eofAt, nil
	}
	for _, w := range c.workers {
		for _, r := range w.readers {
			pos, eof, err := r.q.available()
			if err != nil {
				return nil, nil, err
			}
			g := r.part.global
			avail[g] = max(0, pos-ends[g])
			eofAt[g] = -1
			if eof {
				eofAt[g] = pos
			}
		}
	}
	return avail, eofAt, nil
}

// rangesMaxTS is the greatest event time in each range (NoWatermark for
// an empty one).
func (c *coordinator) rangesMaxTS(ranges []partRange) ([]int64, error) {
	if c.proc != nil {
		return c.procMaxTS(context.Background(), ranges)
	}
	out := make([]int64, len(ranges))
	for _, p := range c.topo.parts {
		g, rg := p.global, ranges[p.global]
		out[g] = operator.NoWatermark
		if rg.End > rg.Start {
			out[g] = c.workers[p.owner].queueOf(g).maxTS(rg.Start, rg.End)
		}
	}
	return out, nil
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
		if tr := c.env.Trace; tr != nil {
			tr.Record(spacetime.Event{Kind: spacetime.Seam, Lane: coordinatorLane, Worker: -1, ID: n, Note: "offsets " + seamNote(c.topo, e)})
		}
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
