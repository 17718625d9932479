package microbatch

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// State versions.
//
// After batch N every stateful operator is snapshotted (after Flush) and
// each key group's state is fingerprinted. Version N writes, per (stage,
// subtask), one object holding the key groups whose fingerprint changed
// since the previous version: a delta. Every FullSnapshotEvery versions the
// object holds every non-empty key group instead: a full snapshot. The
// manifest, written last, maps every (stage, key group) to the object that
// holds its current state, so restoring version N reads exactly the newest
// full snapshot plus the deltas up to N that are still current, without
// walking a chain. A version in which no group changed writes nothing; its
// commit entry names the older version that still describes the state.
//
// The per-key-group event-time watermark the window and join operators keep
// in their state (column "watermark") is left out of the fingerprint: it
// changes with every watermark, not with the data, and the executor
// re-delivers the watermark of the restored batch right after a restore, so
// every group ends up with the same watermark as before the crash.

// watermarkColumn is the state column excluded from fingerprints.
const watermarkColumn = "watermark"

var fpSeed = maphash.MakeSeed()

// fingerprint hashes the content of one key group's state; never 0.
func fingerprint(b arrow.RecordBatch) uint64 {
	var h maphash.Hash
	h.SetSeed(fpSeed)
	var n [8]byte
	rows := b.NumRows()
	for i := range n {
		n[i] = byte(rows >> (8 * i))
	}
	_, _ = h.Write(n[:])
	for c := 0; c < int(b.NumCols()); c++ {
		if b.ColumnName(c) == watermarkColumn {
			continue
		}
		_, _ = h.WriteString(b.ColumnName(c))
		col := b.Column(c)
		a, ok := col.(*array.Int64)
		if !ok || a.NullN() > 0 {
			// Not a plain int64 column: hash its buffers as stored. Equal
			// content may then hash differently, which only costs a write.
			for _, buf := range col.Data().Buffers() {
				if buf != nil {
					_, _ = h.Write(buf.Bytes())
				}
			}
			continue
		}
		vals := a.Int64Values()
		if len(vals) > 0 {
			_, _ = h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), len(vals)*8))
		}
	}
	return h.Sum64() | 1
}

// stageSnap is one stage subtask's snapshot for one version.
type stageSnap struct {
	si      int
	worker  *worker
	parts   []operator.KeyGroupState // released after encoding
	fps     [keygroup.Count]uint64
	changed []int // key groups whose state differs from the last version
	deleted []int // key groups that became empty
	rows    int64
	bytes   int64
}

// takeSnapshot snapshots stage si on worker w and compares fingerprints.
func (w *worker) takeSnapshot(si int) (*stageSnap, error) {
	st, ok := w.ops[si].(operator.Stateful)
	if !ok {
		return nil, fmt.Errorf("stage %d is not stateful", si)
	}
	parts, err := st.Snapshot()
	if err != nil {
		return nil, err
	}
	s := &stageSnap{si: si, worker: w, parts: parts}
	for _, p := range parts {
		fp := fingerprint(p.Batch)
		s.fps[p.KeyGroup] = fp
		if fp != w.fps[si][p.KeyGroup] {
			s.changed = append(s.changed, p.KeyGroup)
		}
		s.rows += p.Batch.NumRows()
		s.bytes += batchBytes(p.Batch)
	}
	for kg, old := range w.fps[si] {
		if old != 0 && s.fps[kg] == 0 {
			s.deleted = append(s.deleted, kg)
		}
	}
	return s, nil
}

// encode encodes the key groups to write (all present ones when full)
// into the worker's buffer and returns the blob and the groups it holds.
func (s *stageSnap) encode(stage string, full bool) ([]byte, []int, error) {
	var parts []operator.KeyGroupState
	var kgs []int
	if full {
		parts = s.parts
	} else {
		want := map[int]bool{}
		for _, kg := range s.changed {
			want[kg] = true
		}
		for _, p := range s.parts {
			if want[p.KeyGroup] {
				parts = append(parts, p)
			}
		}
	}
	if len(parts) == 0 {
		return nil, nil, nil
	}
	for _, p := range parts {
		kgs = append(kgs, p.KeyGroup)
	}
	var buf bytes.Buffer
	if err := state.EncodeAll(&buf, fmt.Sprintf("%s/s%d", stage, s.worker.id), parts); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), kgs, nil
}

func (s *stageSnap) release() {
	operator.ReleaseStates(s.parts)
	s.parts = nil
}

func batchBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		for _, buf := range c.Data().Buffers() {
			if buf != nil {
				n += int64(buf.Len())
			}
		}
	}
	return n
}

// loadedState is decoded state: per stage, the state of each key group.
type loadedState map[string]*[keygroup.Count]operator.KeyGroupState

func (ls loadedState) release() {
	for _, a := range ls {
		for i := range a {
			if a[i].Batch != nil {
				a[i].Batch.Release()
				a[i].Batch = nil
			}
		}
	}
}

// loadState reads and decodes the objects of idx holding key groups that
// need selects, in parallel. Every object is checksummed twice (by the
// store and by the state codec): a torn or corrupt object fails the load.
func loadState(ctx context.Context, store storage.Store, prefix string, idx stateIndex,
	need func(stage string, kg int) bool, alloc memory.Allocator) (loadedState, error) {
	type want struct {
		stage string
		kgs   []int
	}
	byObj := map[string][]want{}
	for stage, a := range idx {
		perObj := map[string][]int{}
		for kg, o := range a {
			if o != "" && need(stage, kg) {
				perObj[o] = append(perObj[o], kg)
			}
		}
		for o, kgs := range perObj {
			byObj[o] = append(byObj[o], want{stage, kgs})
		}
	}
	out := loadedState{}
	for stage := range idx {
		out[stage] = &[keygroup.Count]operator.KeyGroupState{}
	}
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for obj, wants := range byObj {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			err := func() error {
				data, err := store.Get(ctx, prefix+obj)
				if err != nil {
					return err
				}
				_, parts, err := state.DecodeAll(data, alloc)
				if err != nil {
					return fmt.Errorf("state object %s: %w", obj, err)
				}
				byKG := map[int]operator.KeyGroupState{}
				for _, p := range parts {
					byKG[p.KeyGroup] = p
				}
				mu.Lock()
				defer mu.Unlock()
				for _, wt := range wants {
					for _, kg := range wt.kgs {
						p, ok := byKG[kg]
						if !ok {
							operator.ReleaseStates(parts)
							return fmt.Errorf("state object %s lacks key group %d of stage %s named by the manifest", obj, kg, wt.stage)
						}
						p.Batch.Retain()
						out[wt.stage][kg] = p
					}
				}
				operator.ReleaseStates(parts)
				return nil
			}()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		out.release()
		return nil, firstErr
	}
	return out, nil
}
