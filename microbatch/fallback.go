package microbatch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Falling back past a damaged committed batch.
//
// A restart resumes from the newest committed batch C: its commit entry,
// its offsets entry, the manifest its commit names and every state object
// that manifest refers to. The protocol never leaves any of them half
// written, so one that cannot be read is damage. Then the restart falls
// back to the newest older committed batch C' whose objects all read, and
// the batches C'+1..C run again with exactly their logged positions and
// watermarks (then the uncommitted batch, if one is logged). A batch re-run
// from its logged offsets on top of the state after the batch before it
// delivers the same rows under the same batch id, so:
//
//   - idempotent: the upserts replace themselves;
//   - transactional: the re-run epochs are published under the visible
//     names the first run published them under, replacing those files with
//     the same rows. That holds at the parallelism they were published at or
//     a higher one (a lower one would leave the files of the subtasks it no
//     longer has beside the new ones, so that is refused);
//   - append: the re-run rows are visible twice, counted as duplicates.
//
// The re-runs write their commit entries, manifests and state objects
// again, replacing the damaged ones. What cannot be fallen back past is an
// offsets entry a re-run needs: without it the batch's input is unknown,
// and planning it anew could deliver other rows under a batch id the sink
// already holds. Such a restart is refused, naming the entry. The one
// exception is the logged, uncommitted newest batch under a transactional
// sink: nothing of it is visible and its staged output is discarded, so it
// is planned anew.
//
// Retention bounds how far back a restart can fall: only the kept commit
// entries (RetainedBatches) are candidates, and every kept commit keeps its
// state and the offsets entries of the batches after it.

// committedPoint is everything a committed batch restores from, read whole.
type committedPoint struct {
	batch  int64
	ce     *commitEntry
	oe     *offsetsEntry
	idx    stateIndex
	full   bool
	minObj int64
	// deltaBytes is what the deltas since the last full snapshot add up to.
	deltaBytes int64
	ls         loadedState
}

// stopsFallback reports whether err says nothing about the objects read:
// a crash, a cancelled run or storage that does not answer. An older batch
// would not restore either, and falling back would re-run batches for
// nothing.
func stopsFallback(ctx context.Context, err error) bool {
	_, crash := fault.AsCrash(err)
	return crash || ctx.Err() != nil || errors.Is(err, storage.ErrUnreachable) ||
		errors.As(err, new(run.RefusedError))
}

// loadCommitted reads committed batch n whole, or fails keeping nothing.
func (c *coordinator) loadCommitted(ctx context.Context, n int64) (*committedPoint, error) {
	ce, err := c.readCommit(ctx, n)
	if err != nil {
		return nil, err
	}
	if ce.StateVersion > n {
		return nil, fmt.Errorf("commits/%d names state version %d, newer than the batch", n, ce.StateVersion)
	}
	oe, err := c.readOffsets(ctx, n)
	if err != nil {
		return nil, err
	}
	p := &committedPoint{batch: n, ce: ce, oe: oe, idx: stateIndex{}, minObj: -1}
	for si, st := range c.topo.stateful {
		if st {
			p.idx[c.topo.stages[si].ID] = &[keygroup.Count][]string{}
		}
	}
	if ce.StateVersion >= 0 {
		var me *manifestEntry
		if p.idx, me, p.minObj, err = c.readManifest(ctx, ce.StateVersion); err != nil {
			return nil, err
		}
		p.full, p.deltaBytes = me.Full, me.DeltaBytes
	}
	if p.ls, err = loadState(ctx, c.store, c.prefix, p.idx, func(string, int) bool { return true }, c.alloc); err != nil {
		return nil, fmt.Errorf("restoring state version %d: %w", ce.StateVersion, err)
	}
	return p, nil
}

// restorePoint picks the committed batch to resume from: the newest one in
// the listing that reads whole (newest is rp.LastCommitted), and, when that
// is an older one, the logged entries of the batches to run again after it.
// It returns the point and the entries, oldest first; the caller owns the
// point's loaded state.
func (c *coordinator) restorePoint(ctx context.Context, l Listing, rp RestartPlan) (*committedPoint, []*offsetsEntry, error) {
	var errs []string
	var pt *committedPoint
	for i := len(l.Commits) - 1; i >= 0 && pt == nil; i-- {
		n := l.Commits[i]
		if n > rp.LastCommitted {
			continue
		}
		p, err := c.loadCommitted(ctx, n)
		if err != nil {
			if stopsFallback(ctx, err) {
				return nil, nil, err
			}
			errs = append(errs, fmt.Sprintf("batch %d: %v", n, err))
			continue
		}
		pt = p
	}
	if pt == nil {
		more := ""
		if len(errs) == 1 {
			more = fmt.Sprintf(" (retention keeps %d batches, so there was no older one to fall back to)", c.opts.retained)
		}
		return nil, nil, fmt.Errorf("no committed batch can be restored%s: %s; the run cannot be resumed", more, strings.Join(errs, "; "))
	}
	// The batches after the point that ran before: every committed one,
	// then the logged uncommitted one. A batch logged ahead of an
	// uncommitted one began no work and is planned anew (PlanRestart).
	last := rp.LastCommitted
	if rp.Rerun >= 0 {
		last = rp.Rerun
	}
	var chain []*offsetsEntry
	ends := make([]int64, len(pt.oe.Ranges))
	for i, r := range pt.oe.Ranges {
		ends[i] = r.End
	}
	prev := pt.batch
	for n := pt.batch + 1; n <= last; n++ {
		e, err := c.readOffsets(ctx, n)
		if err == nil {
			err = startsAt(e, prev, ends)
		}
		if err != nil {
			why := ""
			if pt.batch < rp.LastCommitted {
				why = fmt.Sprintf(" (batch %d could not be restored, so the restart fell back to batch %d)", rp.LastCommitted, pt.batch)
			}
			switch {
			case stopsFallback(ctx, err):
			case n != rp.Rerun || n <= rp.LastCommitted:
				err = c.unrunnable(n, why, err)
			default:
				err = c.unreadableRerun(n, why, err)
			}
			if err != nil {
				pt.ls.release()
				return nil, nil, err
			}
			break
		}
		chain = append(chain, e)
		for i, r := range e.Ranges {
			ends[i] = r.End
		}
		prev = n
	}
	if pt.batch < rp.LastCommitted {
		again := fmt.Sprintf("batch %d ran again from its logged offsets", rp.LastCommitted)
		if pt.batch+1 < rp.LastCommitted {
			again = fmt.Sprintf("batches %d..%d ran again from their logged offsets", pt.batch+1, rp.LastCommitted)
		}
		msg := fmt.Sprintf("batch %d could not be restored (%s); resumed from batch %d, and %s", rp.LastCommitted, errs[0], pt.batch, again)
		c.met.note(msg)
		if c.env.Log != nil {
			c.env.Log.Warn("microbatch: fell back past an unreadable committed batch", "batch", rp.LastCommitted,
				"resumed_from", pt.batch, "error", errs[0])
		}
		if err := c.checkRepublish(pt.batch, chain); err != nil {
			pt.ls.release()
			return nil, nil, err
		}
	}
	return pt, chain, nil
}

// unrunnable is the refusal of a restart that needs batch n to run again
// from offsets it cannot read.
func (c *coordinator) unrunnable(n int64, why string, err error) error {
	return fmt.Errorf("batch %d must run again from its logged offsets%s, and they cannot be read: %w; the run cannot be resumed", n, why, err)
}

// unreadableRerun decides about the logged, uncommitted batch n whose
// offsets entry cannot be read. Under a transactional sink nothing of it is
// visible and the sink discards what it staged, so it is planned anew (nil);
// the other sinks may already hold its rows, so the restart is refused.
func (c *coordinator) unreadableRerun(n int64, why string, err error) error {
	if c.env.Sink.Mode() != sink.Transactional {
		return c.unrunnable(n, why, err)
	}
	c.met.note(fmt.Sprintf("the logged batch %d could not be read (%v); it was not committed and the transactional sink discards what it staged, so it is planned anew", n, err))
	if c.env.Log != nil {
		c.env.Log.Warn("microbatch: the uncommitted batch's offsets entry cannot be read; planning it anew", "batch", n, "error", err)
	}
	return nil
}

// startsAt checks that batch e follows batch prev, which ended every
// partition at ends.
func startsAt(e *offsetsEntry, prev int64, ends []int64) error {
	for i, r := range e.Ranges {
		if r.Start != ends[i] {
			return fmt.Errorf("offsets/%d starts partition %s at %d, but batch %d ended it at %d: the log is damaged",
				e.Batch, r.Partition, r.Start, prev, ends[i])
		}
	}
	return nil
}

// checkRepublish refuses a fallback whose re-runs would publish epochs
// again at a lower parallelism than they were published at: visible names
// are per subtask, and the files of the subtasks the run no longer has
// would stay beside the new ones.
func (c *coordinator) checkRepublish(from int64, chain []*offsetsEntry) error {
	pub, ok := c.env.Sink.(sink.EpochPublisher)
	if !ok {
		return nil
	}
	last, _, err := pub.PublishedAfter(math.MaxInt64) // reads no rows
	if err != nil {
		return fmt.Errorf("falling back to batch %d: %w", from, err)
	}
	i := slices.IndexFunc(chain, func(e *offsetsEntry) bool { return e.Batch <= last && e.Parallelism > c.par })
	if i < 0 {
		return nil
	}
	e := chain[i]
	return run.RefusedError{Err: fmt.Errorf("resuming falls back to batch %d, and batch %d, which the transactional sink already published at parallelism %d, must run again: at parallelism %d it would leave the files of the other subtasks visible beside its new ones; resume at parallelism %d or more",
		from, e.Batch, e.Parallelism, c.par, e.Parallelism)}
}

// replayed returns a copy of the logged entry of batch n when n is a batch
// to run again after a fallback, nil otherwise. Planning returns it instead
// of a new plan.
func (c *coordinator) replayed(n int64) *offsetsEntry {
	e, ok := c.replay[n]
	if !ok {
		return nil
	}
	cp := *e
	cp.Ranges = slices.Clone(e.Ranges)
	// The entry is logged again as it was, except that it records the
	// most subtasks the epoch may be published at from now on.
	cp.Parallelism = max(cp.Parallelism, c.par)
	return &cp
}
