package microbatch

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
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
// each key group's state is compared, row by row, with the worker's copy
// of the previous version (its base). An operator that hands over only
// its changes (operator.ChangeSnapshotter) skips both: see
// statechanges.go. Version N writes, per (stage,
// subtask), one object holding only the key groups that changed: a delta.
// A changed key group is stored as an edit (the new and changed rows and
// a script that rebuilds the group from its previous state, see package
// state) or, when most of it changed or there is no base, whole. A full
// snapshot stores every non-empty key group whole; it is written when the
// deltas written since the last one add up to the state's size (or after
// FullSnapshotEvery versions), so the bytes written follow the changes
// while a restore reads at most the state about twice.
//
// The manifest, written beside the objects, lists for every (stage, key
// group) its chain: the object holding it whole, then every later object
// holding an edit of it, oldest first. Restoring version N reads exactly
// those objects, in parallel, and applies the edits in order. A version in
// which no group changed writes nothing; its commit entry names the older
// version that still describes the state.
//
// The per-key-group event-time watermark the window and join operators keep
// in their state (column "watermark") is left out of the comparison: it
// changes with every watermark, not with the data, and the executor
// re-delivers the watermark of the restored batch right after a restore, so
// every group ends up with the same watermark as before the crash.

// watermarkColumn is the state column rows are not compared on.
const watermarkColumn = "watermark"

func uniformColumn(s *arrow.Schema) int {
	if idx := s.FieldIndices(watermarkColumn); len(idx) == 1 {
		return idx[0]
	}
	return -1
}

// kgChange is one changed key group of a stage snapshot.
type kgChange struct {
	kg   int
	edit *state.Edit       // nil: stored whole
	rows arrow.RecordBatch // the rows an edit takes (owned); nil when whole
}

// stageSnap is one stage subtask's snapshot for one version.
type stageSnap struct {
	si      int
	worker  *worker
	parts   []operator.KeyGroupState // the new base once kept, else released
	changes []kgChange
	deleted []int // key groups that became empty
	rows    int64
	bytes   int64
	// changedRows counts the new or changed entries of the changed groups.
	changedRows int64
	// patched: taken from the operator's change hand-over; the worker's
	// base (pbase) already is the new version and parts is empty.
	patched bool
	schema  *arrow.Schema
}

// takeSnapshot snapshots stage si on worker w and compares it with the
// worker's base.
func (w *worker) takeSnapshot(si int, alloc memory.Allocator) (*stageSnap, error) {
	h, err := w.holdSnapshot(si)
	if err != nil {
		return nil, err
	}
	return h.compare(alloc)
}

// heldSnapshot is what one stage subtask handed over at the seam, not yet
// compared with the worker's base. Taking it needs the operator idle;
// comparing it does not (the batches are copies), so the comparison can
// run beside the next steps of the seal.
type heldSnapshot struct {
	si      int
	worker  *worker
	parts   []operator.KeyGroupState // Snapshot's, when changes is nil
	changes *operator.StateChanges
	schema  *arrow.Schema // the changes' state schema
}

// holdSnapshot takes stage si's snapshot (or its change hand-over) on
// worker w. The caller compares it or releases it.
func (w *worker) holdSnapshot(si int) (*heldSnapshot, error) {
	if w.usesChanges[si] {
		op := w.ops[si].(operator.ChangeSnapshotter)
		if seq := w.durableSeq[si]; seq > 0 {
			op.AckChanges(seq)
		}
		hc, err := op.SnapshotChanges()
		if err != nil {
			return nil, err
		}
		w.takenSeq[si] = hc.Seq
		return &heldSnapshot{si: si, worker: w, changes: &hc, schema: op.StateSchema()}, nil
	}
	st, ok := w.ops[si].(operator.Stateful)
	if !ok {
		return nil, fmt.Errorf("stage %d is not stateful", si)
	}
	parts, err := st.Snapshot()
	if err != nil {
		return nil, err
	}
	return &heldSnapshot{si: si, worker: w, parts: parts}, nil
}

// release drops what h holds; a compared snapshot holds nothing.
func (h *heldSnapshot) release() {
	if h.changes != nil {
		operator.ReleaseChanges(*h.changes)
		h.changes = nil
	}
	operator.ReleaseStates(h.parts)
	h.parts = nil
}

// compare compares h with the worker's base (patching it, for a change
// hand-over) and says what changed. It takes over what h holds.
func (h *heldSnapshot) compare(alloc memory.Allocator) (*stageSnap, error) {
	w, si := h.worker, h.si
	if h.changes != nil {
		defer h.release()
		return w.patchChanges(si, *h.changes, h.schema, alloc)
	}
	parts := h.parts
	h.parts = nil
	s := &stageSnap{si: si, worker: w, parts: parts}
	var present [keygroup.Count]bool
	for _, p := range parts {
		present[p.KeyGroup] = true
		s.rows += p.Batch.NumRows()
		s.bytes += batchBytes(p.Batch)
		ch, err := diffGroup(w.base[si][p.KeyGroup], p, alloc)
		if err != nil {
			s.release()
			return nil, err
		}
		if ch != nil {
			s.changes = append(s.changes, ch.kgChange)
			s.changedRows += ch.changed
		}
	}
	for kg, b := range w.base[si] {
		if b != nil && !present[kg] {
			s.deleted = append(s.deleted, kg)
		}
	}
	return s, nil
}

type groupDiff struct {
	kgChange
	changed int64
}

// diffGroup compares key group p with its base: nil when unchanged.
func diffGroup(base arrow.RecordBatch, p operator.KeyGroupState, alloc memory.Allocator) (*groupDiff, error) {
	n := p.Batch.NumRows()
	if base == nil {
		return &groupDiff{kgChange{kg: p.KeyGroup}, n}, nil
	}
	uni := uniformColumn(p.Batch.Schema())
	script, take, same, ok := state.Diff(base, p.Batch, uni)
	if !ok {
		if equalRows(base, p.Batch, uni) {
			return nil, nil
		}
		return &groupDiff{kgChange{kg: p.KeyGroup}, n}, nil
	}
	if same {
		return nil, nil
	}
	g := &groupDiff{kgChange{kg: p.KeyGroup}, int64(len(take))}
	if 2*int64(len(take)) > n {
		return g, nil // mostly new: whole is smaller and ends the chain
	}
	rows, err := state.Gather(p.Batch, take, alloc)
	if err != nil {
		return nil, err
	}
	g.rows = rows
	g.edit = &state.Edit{KeyGroup: p.KeyGroup, BaseRows: int(base.NumRows()), ResultRows: int(n),
		ResultCRC: state.ValuesCRC(p.Batch, uni), Script: script}
	return g, nil
}

// equalRows compares two batches of any schema, but for column uniform.
func equalRows(a, b arrow.RecordBatch, uniform int) bool {
	if !a.Schema().Equal(b.Schema()) || a.NumRows() != b.NumRows() {
		return false
	}
	for c := 0; c < int(a.NumCols()); c++ {
		if c != uniform && !array.Equal(a.Column(c), b.Column(c)) {
			return false
		}
	}
	return true
}

// encode encodes the changed key groups (every present one, whole, when
// full) into one delta object and returns it with the groups it holds
// whole and as edits.
//
// The object's name is its operator id: a load checks it, so an intact
// object under another name (of another version or stage) is refused
// instead of rebuilding a wrong state.
func (s *stageSnap) encode(name string, full bool) (blob []byte, whole, edited []int, err error) {
	return encodeStage(name, []*stageSnap{s}, full)
}

// encodeStage encodes the snapshots of every subtask of one stage into
// one delta object: their key groups are disjoint, and one object per
// stage and version is one durable write per version instead of one per
// subtask.
func encodeStage(name string, snaps []*stageSnap, full bool) (blob []byte, whole, edited []int, err error) {
	parts, edits, whole, edited, release := collectStage(snaps, full)
	defer release()
	if len(parts) == 0 {
		return nil, nil, nil, nil
	}
	var buf bytes.Buffer
	if err := state.EncodeDelta(&buf, name, parts, edits); err != nil {
		return nil, nil, nil, err
	}
	return buf.Bytes(), whole, edited, nil
}

// collectStage is collect for the snapshots of every subtask of one
// stage, together; release ends the use of all their rows.
func collectStage(snaps []*stageSnap, full bool) (parts []operator.KeyGroupState, edits []state.Edit, whole, edited []int, release func()) {
	releases := make([]func(), 0, len(snaps))
	for _, s := range snaps {
		p, e, w, ed, rel := s.collect(full)
		releases = append(releases, rel)
		parts, edits = append(parts, p...), append(edits, e...)
		whole, edited = append(whole, w...), append(edited, ed...)
	}
	return parts, edits, whole, edited, func() {
		for _, r := range releases {
			r()
		}
	}
}

// collect returns what s stores: the rows of each changed key group
// (every present one, whole, when full), the edits among them, and which
// groups are whole and which edited. release ends the use of the rows
// wrapped from a patched base; call it once they are encoded.
func (s *stageSnap) collect(full bool) (parts []operator.KeyGroupState, edits []state.Edit, whole, edited []int, release func()) {
	src := s.parts
	release = func() {}
	if s.patched {
		// The wrappers only point at the base's columns.
		var wholeKGs []int
		for _, ch := range s.changes {
			if ch.edit == nil {
				wholeKGs = append(wholeKGs, ch.kg)
			}
		}
		if full {
			wholeKGs = nil
		} else if wholeKGs == nil {
			wholeKGs = []int{}
		}
		src = s.patchedParts(wholeKGs)
		release = func() { operator.ReleaseStates(src) }
	}
	if full {
		for _, p := range src {
			whole = append(whole, p.KeyGroup)
		}
		return src, nil, whole, nil, release
	}
	byKG := map[int]arrow.RecordBatch{}
	for _, p := range src {
		byKG[p.KeyGroup] = p.Batch
	}
	for _, ch := range s.changes {
		if ch.edit == nil {
			parts = append(parts, operator.KeyGroupState{KeyGroup: ch.kg, Batch: byKG[ch.kg]})
			whole = append(whole, ch.kg)
			continue
		}
		parts = append(parts, operator.KeyGroupState{KeyGroup: ch.kg, Batch: ch.rows})
		edits = append(edits, *ch.edit)
		edited = append(edited, ch.kg)
	}
	return parts, edits, whole, edited, release
}

// fingerprints hashes each key group's state (0 = empty group), without
// the watermark column. The state versions no longer need it (they compare
// rows); it is for callers that compare two snapshots of one subtask.
func (s *stageSnap) fingerprints() [keygroup.Count]uint64 {
	var out [keygroup.Count]uint64
	for _, p := range s.parts {
		out[p.KeyGroup] = fingerprint(p.Batch)
	}
	return out
}

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

// keepAsBase makes the snapshot the worker's base for the next version.
func (s *stageSnap) keepAsBase() {
	if s.patched {
		s.release()
		return
	}
	w := s.worker
	for kg, b := range w.base[s.si] {
		if b != nil {
			b.Release()
			w.base[s.si][kg] = nil
		}
	}
	for _, p := range s.parts {
		w.base[s.si][p.KeyGroup] = p.Batch
	}
	s.parts = nil
	s.release()
}

func (s *stageSnap) release() {
	operator.ReleaseStates(s.parts)
	s.parts = nil
	for i := range s.changes {
		if r := s.changes[i].rows; r != nil {
			r.Release()
			s.changes[i].rows = nil
		}
	}
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
// need selects, in parallel, and rebuilds each group from its chain. Every
// object is checksummed twice (by the store and by the state codec), and
// every edit checks its base and its result: a torn or corrupt object, or
// a chain that does not rebuild, fails the load.
func loadState(ctx context.Context, store storage.Store, prefix string, idx stateIndex,
	need func(stage string, kg int) bool, alloc memory.Allocator) (loadedState, error) {
	objs := map[string]bool{}
	for stage, a := range idx {
		for kg, chain := range a {
			if len(chain) > 0 && need(stage, kg) {
				for _, o := range chain {
					objs[o] = true
				}
			}
		}
	}
	type decoded struct {
		parts map[int]arrow.RecordBatch
		edits map[int]state.Edit
		all   []operator.KeyGroupState
	}
	got := make(map[string]*decoded, len(objs))
	defer func() {
		for _, d := range got {
			operator.ReleaseStates(d.all)
		}
	}()
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for obj := range objs {
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
				// Shared (no allocator): the batches point into data,
				// read for this load alone, instead of a second copy of
				// the state beside it.
				id, parts, edits, err := state.DecodeDelta(data, nil)
				if err != nil {
					return fmt.Errorf("state object %s: %w", obj, err)
				}
				if id != obj {
					operator.ReleaseStates(parts)
					return fmt.Errorf("state object %s holds the state written as %s", obj, id)
				}
				d := &decoded{parts: map[int]arrow.RecordBatch{}, edits: edits, all: parts}
				for _, p := range parts {
					d.parts[p.KeyGroup] = p.Batch
				}
				mu.Lock()
				got[obj] = d
				mu.Unlock()
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
		return nil, firstErr
	}
	// Rebuild the groups in parallel: applying a chain's edits is a copy
	// of the group per edit, and groups are independent.
	out := loadedState{}
	type job struct {
		stage string
		kg    int
		chain []string
	}
	var jobs []job
	for stage, a := range idx {
		out[stage] = &[keygroup.Count]operator.KeyGroupState{}
		for kg, chain := range a {
			if len(chain) > 0 && need(stage, kg) {
				jobs = append(jobs, job{stage, kg, chain})
			}
		}
	}
	errs := make([]error, len(jobs))
	var next atomic.Int64
	for range min(runtime.GOMAXPROCS(0), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(jobs); i = int(next.Add(1) - 1) {
				j := jobs[i]
				b, err := rebuildGroup(j.stage, j.kg, j.chain, func(o string) (arrow.RecordBatch, *state.Edit) {
					d := got[o]
					e, ok := d.edits[j.kg]
					if !ok {
						return d.parts[j.kg], nil
					}
					return d.parts[j.kg], &e
				}, alloc)
				errs[i] = err
				if err == nil {
					out[j.stage][j.kg] = operator.KeyGroupState{KeyGroup: j.kg, Batch: b}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			out.release()
			return nil, err
		}
	}
	return out, nil
}

// rebuildGroup applies the chain of one key group: the first object holds
// it whole, every later one an edit. The result is the caller's.
func rebuildGroup(stage string, kg int, chain []string, entry func(obj string) (arrow.RecordBatch, *state.Edit),
	alloc memory.Allocator) (arrow.RecordBatch, error) {
	var cur arrow.RecordBatch
	var sum uint32 // RowsChecksum of cur, once an edit has checked it
	haveSum := false
	for i, o := range chain {
		rows, e := entry(o)
		switch {
		case rows == nil:
			err := fmt.Errorf("state object %s lacks key group %d of stage %s named by the manifest", o, kg, stage)
			if cur != nil {
				cur.Release()
			}
			return nil, err
		case i == 0 && e != nil:
			return nil, fmt.Errorf("state object %s holds an edit of key group %d of stage %s, but the manifest names it first: no base to apply it to", o, kg, stage)
		case i > 0 && e == nil:
			cur.Release()
			return nil, fmt.Errorf("state object %s holds key group %d of stage %s whole, but the manifest chains it after %s", o, kg, stage, chain[i-1])
		case i == 0:
			rows.Retain()
			cur = rows
		default:
			next, nsum, err := state.ApplySum(cur, rows, *e, uniformColumn(rows.Schema()), sum, haveSum, alloc)
			cur.Release()
			sum, haveSum = nsum, e.RowSum
			if err != nil {
				return nil, fmt.Errorf("state object %s, stage %s: %w", o, stage, err)
			}
			cur = next
		}
	}
	return cur, nil
}
