package microbatch

// This file holds retention: the background pass that deletes from
// storage what no kept commit can need any more.

import (
	"context"
)

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
