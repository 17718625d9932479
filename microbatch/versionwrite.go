package microbatch

// This file writes one state version beside the loop: the snapshots the
// seam handed over are compared with the workers' bases, what changed is
// encoded, and the objects and the manifest are written.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// versionWrite is one state version on its way to storage, beside the
// loop: what the seam handed over, the coordinator's view it starts from
// (pending, as of the last committed version), and, once written, the
// pending version it becomes.
type versionWrite struct {
	n        int64
	held     []*heldSnapshot
	mark     *batchMarker
	lastFull int64
	pending  pendingVersion
}

// writeVersion compares v's snapshots with the workers' bases, encodes
// what changed and writes it with its manifest; v.pending becomes the
// version written. It touches no coordinator field (the caller's apply
// does).
func (c *coordinator) writeVersion(ctx context.Context, v *versionWrite) error {
	n, p := v.n, &v.pending
	// Once encoded, the version no longer needs the workers' bases. The
	// pieces of a full version are encoded from them as they are written:
	// handed over to their writers, they let the bases go when the last
	// ends, even after a crash point returned before them.
	basesDone := sync.OnceFunc(func() {
		for _, h := range v.held {
			h.worker.sealing.Done()
		}
	})
	var pieces []*stagePieces
	handedOver := false
	defer func() {
		if !handedOver {
			for _, sp := range pieces {
				sp.release()
			}
			basesDone()
		}
	}()
	snaps := make([]*stageSnap, len(v.held))
	jobs := make([]func() error, len(v.held))
	for i, h := range v.held {
		jobs[i] = func() error {
			s, err := h.compare(c.alloc)
			if err != nil {
				return fmt.Errorf("snapshot of stage %s subtask %d: %w", c.topo.stages[h.si].ID, h.worker.id, err)
			}
			snaps[i] = s
			return nil
		}
	}
	err := runAll(jobs)
	defer func() {
		for _, s := range snaps {
			if s != nil {
				s.release()
			}
		}
	}()
	if err != nil {
		return err
	}
	changed := false
	for _, s := range snaps {
		v.mark.atSeam(c, s)
		changed = changed || len(s.changes) > 0 || len(s.deleted) > 0
		p.rows += s.rows
		p.bytes += s.bytes
		p.changedRows += s.changedRows
	}
	if !changed {
		basesDone()
		return c.point(PointStateMidWrite)
	}
	// A full snapshot once the deltas since the last one add up to the
	// state's size: the bytes written stay within about twice the changes,
	// and a restore reads at most about twice the state. The version count
	// is a backstop for many tiny deltas, each one more object to read.
	full := c.fullVersion(n, v.lastFull, p)
	idx := p.idx.clone()
	if full {
		for id := range idx {
			idx[id] = &[keygroup.Count][]string{}
		}
	}
	// One object per stateful stage, holding every subtask's key groups
	// (a full version of a large state: several, fullpieces.go); the
	// deltas are encoded here, in parallel, the full pieces as they are
	// written.
	var stages [][]*stageSnap
	slices.SortFunc(snaps, func(a, b *stageSnap) int { return cmp.Or(a.si-b.si, a.worker.id-b.worker.id) })
	for i, s := range snaps {
		if i == 0 || s.si != snaps[i-1].si {
			stages = append(stages, nil)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], s)
	}
	type encoded struct {
		blob          []byte
		whole, edited []int
	}
	enc := make([]encoded, len(stages))
	var encs []func() error
	for i, ss := range stages {
		id := c.topo.stages[ss[0].si].ID
		if full {
			pieces = append(pieces, splitFull(n, id, ss, cmp.Or(c.opts.hooks.fullPieceBytes, fullPieceBytes)))
			continue
		}
		encs = append(encs, func() error {
			e := &enc[i]
			var err error
			if e.blob, e.whole, e.edited, err = encodeStage(stateObjectName(n, id), ss, false); err != nil {
				return fmt.Errorf("encoding state of stage %s: %w", id, err)
			}
			return nil
		})
	}
	if err := runAll(encs); err != nil {
		return err
	}
	var written atomic.Int64 // the pieces', as they are written
	putObject := func(name string, blob []byte) error {
		if err := c.put(ctx, name, blob); err != nil {
			return fmt.Errorf("writing state object %s: %w", name, err)
		}
		return nil
	}
	var fns []func() error
	var deltas int64
	for i, ss := range stages {
		id := c.topo.stages[ss[0].si].ID
		a := idx[id]
		if !full {
			for _, s := range ss {
				for _, kg := range s.deleted {
					a[kg] = nil
				}
			}
		}
		if e := enc[i]; e.blob != nil {
			name := stateObjectName(n, id)
			fns = append(fns, func() error { return putObject(name, e.blob) })
			for _, kg := range e.whole {
				a[kg] = []string{name}
			}
			for _, kg := range e.edited {
				a[kg] = append(slices.Clip(a[kg]), name)
			}
			p.written += int64(len(e.blob))
			deltas += int64(len(e.blob))
		}
		for _, s := range ss {
			s.keepAsBase()
		}
	}
	if len(pieces) == 0 {
		basesDone()
	}
	var left atomic.Int32
	left.Store(int32(len(pieces)))
	for _, sp := range pieces {
		sp.index(idx[sp.stage])
		fns = append(fns, func() error {
			defer func() {
				if left.Add(-1) == 0 {
					basesDone()
				}
			}()
			return sp.write(func(name string, blob []byte) error {
				written.Add(int64(len(blob)))
				return putObject(name, blob)
			})
		})
	}
	man, err := pendingManifest(p, idx, n, full, deltas)
	if err != nil {
		return err
	}
	manifest := func() error {
		if err := c.put(ctx, manifestName(n), man); err != nil {
			return fmt.Errorf("writing state manifest %d: %w", n, err)
		}
		return nil
	}
	serial := c.opts.hooks.serialSeal
	if !serial {
		fns = append(fns, manifest)
	}
	handedOver = len(pieces) > 0
	if err := c.parallel(PointStateMidWrite, fns); err != nil {
		return err
	}
	p.written += written.Load()
	if serial {
		return manifest()
	}
	return nil
}
