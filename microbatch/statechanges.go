package microbatch

// State versions from the operators' change hand-over.
//
// An operator that implements operator.ChangeSnapshotter hands over only
// the key groups (or, within a group, the entries) changed since the last
// acknowledged snapshot. The worker keeps its base of such a stage as plain
// columns (patchGroup) and patches it in place: an entry it already holds
// is overwritten where it is, a new one appended, so the edit that rebuilds
// the group from its previous version is "copy, skip one, take one" around
// each changed position, and costs the change, not the group. A group
// handed over whole is diffed with its base as a whole snapshot is.
//
// The snapshot's sequence number is acknowledged once commits/N, which
// names the version, is durable (committedBatch), and the acknowledgement
// is delivered right before the next hand-over, when the operator is idle.
// A version that never became durable is not acknowledged: the operator
// hands its changes over again, and the base, which already holds them,
// sees the entries equal and writes nothing for them.

import (
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/offheap"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// patchGroup is one key group's state as of the last version written or
// restored, column by column (every column int64, without nulls), in
// storage's row order.
type patchGroup struct {
	cols [][]int64
	mem  []*offheap.Array[int64] // cols' memory (patchcols.go)
	// index maps an entry's key to its row, built on the first entry
	// hand-over and kept while rows only change in place or are appended.
	index *posIndex
	// sum is state.RowsChecksum of the rows (when hasSum), kept up to
	// date row by row so an edit's check costs the change.
	sum    uint32
	hasSum bool
}

func (g *patchGroup) rows() int { return len(g.cols[0]) }

// newPatchGroup copies b's values.
func newPatchGroup(b arrow.RecordBatch) (*patchGroup, error) {
	vals, ok := state.Int64Columns(b)
	if !ok {
		return nil, fmt.Errorf("state of schema %s is not plain int64 columns", b.Schema())
	}
	g := emptyPatchGroup(len(vals))
	for c, v := range vals {
		g.cols[c], g.mem[c] = cloneColumn(v)
	}
	return g, nil
}

// batch wraps the group's columns as a batch without copying them. It is
// valid until the group is next patched or freed; it holds no allocator's
// memory.
func (g *patchGroup) batch(s *arrow.Schema) arrow.RecordBatch { return int64Batch(s, g.cols) }

// int64Batch wraps int64 columns of equal length as a batch of schema s,
// without copying them; its memory is the Go heap's.
func int64Batch(s *arrow.Schema, cols [][]int64) arrow.RecordBatch {
	arrs := make([]arrow.Array, len(cols))
	for c, v := range cols {
		buf := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))
		data := array.NewData(arrow.PrimitiveTypes.Int64, len(v), []*memory.Buffer{nil, buf}, nil, 0, 0)
		arrs[c] = array.NewInt64Data(data)
		data.Release()
	}
	return operator.NewBatchOwning(s, len(cols[0]), arrs...)
}

// usesChanges reports whether stage op's state versions come from its
// change hand-over: it offers one and its state is plain int64 columns.
// The marker lesson fingerprints whole snapshots and keeps Snapshot.
func (c *coordinator) usesChanges(op operator.Operator) bool {
	return offersChanges(op) && c.marker() == nil
}

// offersChanges: op offers a change hand-over and its state is plain
// int64 columns.
func offersChanges(op operator.Operator) bool {
	cs, ok := op.(operator.ChangeSnapshotter)
	return ok && state.Diffable(cs.StateSchema())
}

// initChanges prepares the worker's change bookkeeping for stages stages.
func (w *worker) initChanges(stages int) {
	w.pbase = make([][keygroup.Count]*patchGroup, stages)
	w.takenSeq = make([]uint64, stages)
	w.durableSeq = make([]uint64, stages)
}

// changesDurable records that the snapshots taken so far are in a durable
// version.
func (w *worker) changesDurable() {
	copy(w.durableSeq, w.takenSeq)
}

// patchChanges compares a change hand-over of stage si (holdSnapshot)
// with the worker's base: it patches the base and records per changed
// group an edit or the group whole. The caller releases hc.
func (w *worker) patchChanges(si int, hc operator.StateChanges, schema *arrow.Schema, alloc memory.Allocator) (*stageSnap, error) {
	var err error
	s := &stageSnap{si: si, worker: w, patched: true, schema: schema}
	base := &w.pbase[si]
	for _, g := range hc.Groups {
		if g.KeyGroup < 0 || g.KeyGroup >= keygroup.Count || !g.Batch.Schema().Equal(schema) {
			s.release()
			return nil, fmt.Errorf("change hand-over: key group %d with schema %s, want %s", g.KeyGroup, g.Batch.Schema(), schema)
		}
		var ch *groupDiff
		if g.Entries {
			ch, err = patchEntries(base, g, hc.KeyColumn, &w.scratch)
		} else {
			ch, err = patchWhole(base, g, alloc)
		}
		if err != nil {
			s.release()
			return nil, fmt.Errorf("change hand-over, key group %d: %w", g.KeyGroup, err)
		}
		if base[g.KeyGroup] == nil {
			s.deleted = append(s.deleted, g.KeyGroup)
			continue
		}
		if ch != nil {
			s.changes = append(s.changes, ch.kgChange)
			s.changedRows += ch.changed
		}
	}
	for _, g := range base {
		if g != nil {
			s.rows += int64(g.rows())
			s.bytes += int64(g.rows() * len(g.cols) * 8)
		}
	}
	return s, nil
}

// patchWhole replaces group g's base with g's batch and diffs the two.
func patchWhole(base *[keygroup.Count]*patchGroup, g operator.GroupChange, alloc memory.Allocator) (*groupDiff, error) {
	old := base[g.KeyGroup]
	if g.Batch.NumRows() == 0 {
		base[g.KeyGroup] = nil
		old.free()
		return nil, nil
	}
	ng, err := newPatchGroup(g.Batch)
	if err != nil {
		return nil, err
	}
	base[g.KeyGroup] = ng
	if old == nil {
		return &groupDiff{kgChange{kg: g.KeyGroup}, g.Batch.NumRows()}, nil
	}
	// The diff takes its rows from the hand-over, not from old.
	ob := old.batch(g.Batch.Schema())
	d, err := diffGroup(ob, operator.KeyGroupState{KeyGroup: g.KeyGroup, Batch: g.Batch}, alloc)
	ob.Release()
	old.free()
	if err == nil && d != nil && d.edit != nil {
		// One check for every edit of the object (state.EncodeDelta).
		ng.sum, ng.hasSum = state.RowsChecksum(g.Batch, uniformColumn(g.Batch.Schema())), true
		d.edit.ResultCRC, d.edit.RowSum = ng.sum, true
	}
	return d, err
}

// patchEntries writes g's entries into the base of their group in place
// (new ones at its end) and returns the edit that does the same to the
// stored version, or nil when no entry differs from the base.
//
// The replaced rows are marked in a bitset over the group's rows (sc), so
// they come out in position order without a sort, and a run of adjacent
// ones is one copy, skip, take; the rows the edit takes are copied out of
// the hand-over's columns into the Go heap, without the allocator.
func patchEntries(base *[keygroup.Count]*patchGroup, g operator.GroupChange, keyCol int, sc *patchScratch) (*groupDiff, error) {
	vals, ok := state.Int64Columns(g.Batch)
	if !ok || keyCol < 0 || keyCol >= len(vals) {
		return nil, fmt.Errorf("entries of schema %s keyed by column %d are not plain int64 columns", g.Batch.Schema(), keyCol)
	}
	pg := base[g.KeyGroup]
	if pg == nil {
		pg = emptyPatchGroup(len(vals))
		base[g.KeyGroup] = pg
	}
	uni := uniformColumn(g.Batch.Schema())
	if pg.index == nil {
		pg.index = newPosIndex(pg.rows() + int(g.Batch.NumRows()))
		for r := range pg.cols[keyCol] {
			pg.index.put(pg.cols[keyCol], r)
		}
	}
	if !pg.hasSum {
		pg.sum, pg.hasSum = state.RowsChecksumCols(pg.cols, pg.rows(), uni), true
	}
	baseRows := pg.rows()
	sc.reset(baseRows)
	replaced := 0
	var added []int
	keys := vals[keyCol]
	// Every lookup first, in a loop of its own: the base and its index
	// are mostly out of cache by the next batch, and independent lookups
	// let the CPU wait for several misses at once instead of one per
	// entry (the entry loop below also reads the rows it finds).
	if cap(sc.pos) < len(keys) {
		sc.pos = make([]int32, len(keys))
	}
	found := sc.pos[:len(keys)]
	for r, k := range keys {
		found[r] = int32(pg.index.lookup(pg.cols[keyCol], k))
	}
	for r, k := range keys {
		pos := int(found[r])
		if pos < 0 {
			// Not in the base: new, unless handed over twice.
			if _, dup := pg.index.get(pg.cols[keyCol], k); dup {
				sc.clear()
				return nil, fmt.Errorf("key %d handed over twice in one hand-over", k)
			}
			at := pg.rows()
			pg.appendRow(vals, r)
			pg.index.put(pg.cols[keyCol], at)
			pg.sum += state.RowCountShare + state.RowHash(pg.cols, at, uni)
			added = append(added, r)
			continue
		}
		if sc.bits[pos>>6]&(1<<(pos&63)) != 0 {
			sc.clear()
			return nil, fmt.Errorf("key %d handed over twice in one hand-over", k)
		}
		same := true
		for c := range vals {
			// The key column matched in the index.
			same = same && (c == keyCol || pg.cols[c][pos] == vals[c][r])
		}
		if same {
			continue // handed over again (a version not acknowledged)
		}
		pg.sum -= state.RowHash(pg.cols, pos, uni)
		for c := range vals {
			pg.cols[c][pos] = vals[c][r]
		}
		pg.sum += state.RowHash(pg.cols, pos, uni)
		sc.bits[pos>>6] |= 1 << (pos & 63)
		sc.rowAt[pos] = int32(r)
		replaced++
	}
	if pg.rows() != g.Rows || pg.index.n != pg.rows() {
		sc.clear()
		return nil, fmt.Errorf("the operator holds %d entries, the worker's copy of its state %d (%d distinct keys)", g.Rows, pg.rows(), pg.index.n)
	}
	n := replaced + len(added)
	if n == 0 {
		return nil, nil
	}
	d := &groupDiff{kgChange{kg: g.KeyGroup}, int64(n)}
	if baseRows == 0 || 2*n > pg.rows() {
		sc.clear()
		return d, nil // mostly new: whole is smaller and ends the chain
	}
	take := sc.take[:0]
	var w state.ScriptWriter
	at, run := 0, 0 // run: replaced rows ending just before the current one
	for wi, word := range sc.bits {
		for word != 0 {
			pos := wi<<6 | bits.TrailingZeros64(word)
			word &= word - 1
			if run > 0 && pos != at+run {
				w.Add(state.OpSkip, run)
				w.Add(state.OpTake, run)
				at += run
				run = 0
			}
			if run == 0 {
				w.Add(state.OpCopy, pos-at)
				at = pos
			}
			run++
			take = append(take, int(sc.rowAt[pos]))
		}
		sc.bits[wi] = 0
	}
	w.Add(state.OpSkip, run)
	w.Add(state.OpTake, run)
	at += run
	w.Add(state.OpCopy, baseRows-at)
	w.Add(state.OpTake, len(added))
	take = append(take, added...)
	sc.take = take
	if uni >= 0 {
		// Apply gives every row the first stored row's value of the
		// uniform column; the base follows.
		v := vals[uni][take[0]]
		for i := range pg.cols[uni] {
			pg.cols[uni][i] = v
		}
	}
	cols := make([][]int64, len(vals))
	for c, v := range vals {
		out := make([]int64, len(take))
		for i, r := range take {
			out[i] = v[r]
		}
		cols[c] = out
	}
	d.rows = int64Batch(g.Batch.Schema(), cols)
	d.edit = &state.Edit{KeyGroup: g.KeyGroup, BaseRows: baseRows, ResultRows: pg.rows(), ResultCRC: pg.sum, RowSum: true, Script: w.Bytes()}
	return d, nil
}

// patchScratch is a worker's reusable memory for patchEntries: which rows
// of a group a hand-over replaced (bits, all zero between calls) and by
// which hand-over row (rowAt).
type patchScratch struct {
	bits  []uint64
	rowAt []int32
	take  []int
	pos   []int32 // per hand-over row, its base row or -1
}

// reset makes room for a group of n rows.
func (sc *patchScratch) reset(n int) {
	if words := (n + 63) / 64; cap(sc.bits) < words {
		sc.bits = make([]uint64, words)
	} else {
		sc.bits = sc.bits[:words]
	}
	if cap(sc.rowAt) < n {
		sc.rowAt = make([]int32, n)
	}
}

// clear zeroes the marks of a hand-over that made no edit.
func (sc *patchScratch) clear() { clear(sc.bits) }

// patchedParts wraps the base groups of s's stage named by kgs (nil: every
// non-empty one) for encoding; the caller releases them before the base
// is patched again.
func (s *stageSnap) patchedParts(kgs []int) []operator.KeyGroupState {
	base := &s.worker.pbase[s.si]
	var parts []operator.KeyGroupState
	if kgs == nil {
		for kg, g := range base {
			if g != nil {
				parts = append(parts, operator.KeyGroupState{KeyGroup: kg, Batch: g.batch(s.schema)})
			}
		}
		return parts
	}
	for _, kg := range kgs {
		parts = append(parts, operator.KeyGroupState{KeyGroup: kg, Batch: base[kg].batch(s.schema)})
	}
	return parts
}

// posIndex maps an entry's key to its row: open addressing, linear
// probing (a Go map took a quarter of the hand-over's time). A slot holds
// only the row; the key is read from the group's key column, which the
// caller passes in, so a slot is 4 bytes rather than 16 with the key
// beside it: at a load of a quarter to a half, 8 to 16 bytes a key instead
// of 32 to 64, the largest part of the worker's copy of a large state. A
// lookup reads the key column where the row is, which the hand-over reads
// next anyway.
//
// Large indexes live outside Go's heap (package offheap), as the
// operator's own tables do: they last as long as the group, and on the
// heap the collector's slack would double them. A replaced group's index
// is freed by its cleanup.
type posIndex struct {
	slots []int32 // row+1; 0: empty
	mem   *offheap.Array[int32]
	n     int
}

func newPosIndex(n int) *posIndex {
	size := 16
	for size < 2*n {
		size *= 2
	}
	x := &posIndex{mem: offheap.New[int32](size)}
	x.slots = x.mem.S
	return x
}

// lookup is get with -1 for a key not present.
func (x *posIndex) lookup(keys []int64, k int64) int {
	if r, ok := x.get(keys, k); ok {
		return r
	}
	return -1
}

// get finds k, keys being the group's key column.
func (x *posIndex) get(keys []int64, k int64) (int, bool) {
	mask := uint64(len(x.slots) - 1)
	for i := keygroup.Hash(k) & mask; ; i = (i + 1) & mask {
		r := x.slots[i]
		if r == 0 {
			return 0, false
		}
		if keys[r-1] == k {
			return int(r - 1), true
		}
	}
}

// put records row, whose key is keys[row]; a key already present keeps its
// first row (and is not counted twice, so n says how many keys are
// distinct).
func (x *posIndex) put(keys []int64, row int) {
	if 2*(x.n+1) > len(x.slots) {
		old, oldMem := x.slots, x.mem
		x.mem = offheap.New[int32](2 * len(old))
		x.slots, x.n = x.mem.S, 0
		for _, r := range old {
			if r != 0 {
				x.put(keys, int(r-1))
			}
		}
		oldMem.Free()
	}
	k := keys[row]
	mask := uint64(len(x.slots) - 1)
	for i := keygroup.Hash(k) & mask; ; i = (i + 1) & mask {
		r := x.slots[i]
		if r == 0 {
			x.slots[i] = int32(row + 1)
			x.n++
			return
		}
		if keys[r-1] == k {
			return
		}
	}
}
