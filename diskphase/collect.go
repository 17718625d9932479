package diskphase

// This file holds garbage collection: deleting what no unit can need
// after a job committed, the catch-up sweep over jobs already
// committed, and the final sweep after the last job.

import (
	"context"
	"fmt"
	"strings"
)

// collect deletes what no unit can need after job j committed: its staged
// output and append markers, the map files of job j-1 (j itself for
// map-only jobs) and the state of job j-2. A later loss of something still
// needed is repaired by re-running its producer.
func (c *coordinator) collect(ctx context.Context, j int) error {
	x := c.x
	prefixes := []string{x.names.outDir(j), x.names.publishedDir(j)}
	if x.topo.mapOnly() {
		prefixes = append(prefixes, x.names.mapDir(j))
	} else if j >= 1 {
		prefixes = append(prefixes, x.names.mapDir(j-1))
	}
	if j >= 2 {
		prefixes = append(prefixes, x.names.stateDir(j-2))
	}
	for _, p := range prefixes {
		if err := x.deletePrefix(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// sweepCollectable deletes, in one listing, everything collect would have
// deleted for the jobs up to last (all committed).
func (x *execution) sweepCollectable(ctx context.Context, last int) error {
	objs, err := x.store.List(ctx, x.names.root)
	if err != nil {
		return err
	}
	mapUpTo := last - 1
	if x.topo.mapOnly() {
		mapUpTo = last
	}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Name, x.names.root)
		var j int
		var sub string
		if len(rest) < 8 || rest[0] != 'j' || rest[7] != '/' {
			continue
		}
		if _, err := fmt.Sscanf(rest[1:7], "%d", &j); err != nil {
			continue
		}
		sub = rest[8:]
		del := (strings.HasPrefix(sub, "out/") || strings.HasPrefix(sub, "published/")) && j <= last ||
			strings.HasPrefix(sub, "map/") && j <= mapUpTo ||
			strings.HasPrefix(sub, "state/") && j <= last-2
		if del {
			if err := x.store.Delete(ctx, o.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func (x *execution) deletePrefix(ctx context.Context, prefix string) error {
	objs, err := x.store.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := x.store.Delete(ctx, o.Name); err != nil {
			return err
		}
	}
	return nil
}

// finalSweep runs after the last job committed and every attempt has
// ended: it deletes all map files, staged outputs and superseded state
// files (including any an abandoned attempt wrote late), keeping the plans,
// the ledger, the commit markers and the state tables of the last job.
func (x *execution) finalSweep(ctx context.Context) error {
	d, err := x.loadDurable(ctx)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	last := -1
	for j := range d.commits {
		last = max(last, j)
	}
	for u, e := range d.reduces {
		if u.Job == last && e.State != nil {
			for _, c := range e.State.chunks() {
				keep[c.Name] = true
			}
		}
	}
	objs, err := x.store.List(ctx, x.names.root)
	if err != nil {
		return err
	}
	for _, o := range objs {
		rest := strings.TrimPrefix(o.Name, x.names.root)
		i := strings.IndexByte(rest, '/')
		if i < 0 || !strings.HasPrefix(rest, "j") {
			continue
		}
		sub := rest[i+1:]
		if strings.HasPrefix(sub, "map/") || strings.HasPrefix(sub, "out/") || strings.HasPrefix(sub, "published/") ||
			(strings.HasPrefix(sub, "state/") && !keep[o.Name]) {
			if err := x.store.Delete(ctx, o.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
