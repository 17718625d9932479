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
// handed over whole is diffed with its base as takeSnapshot does.
//
// The snapshot's sequence number is acknowledged once commits/N, which
// names the version, is durable (committedBatch), and the acknowledgement
// is delivered right before the next hand-over, when the operator is idle.
// A version that never became durable is not acknowledged: the operator
// hands its changes over again, and the base, which already holds them,
// sees the entries equal and writes nothing for them.

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// patchGroup is one key group's state as of the last version written or
// restored, column by column (every column int64, without nulls), in
// storage's row order.
type patchGroup struct {
	cols [][]int64
	// index maps an entry's key to its row, built on the first entry
	// hand-over and kept while rows only change in place or are appended.
	index map[int64]int32
}

func (g *patchGroup) rows() int { return len(g.cols[0]) }

// newPatchGroup copies b's values.
func newPatchGroup(b arrow.RecordBatch) (*patchGroup, error) {
	vals, ok := state.Int64Columns(b)
	if !ok {
		return nil, fmt.Errorf("state of schema %s is not plain int64 columns", b.Schema())
	}
	g := &patchGroup{cols: make([][]int64, len(vals))}
	for c, v := range vals {
		g.cols[c] = slices.Clone(v)
	}
	return g, nil
}

// batch wraps the group's columns as a batch without copying them. It is
// valid until the group is next patched; its memory is the Go heap's.
func (g *patchGroup) batch(s *arrow.Schema) arrow.RecordBatch {
	arrs := make([]arrow.Array, len(g.cols))
	for c, v := range g.cols {
		buf := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(v))
		data := array.NewData(arrow.PrimitiveTypes.Int64, len(v), []*memory.Buffer{nil, buf}, nil, 0, 0)
		arrs[c] = array.NewInt64Data(data)
		data.Release()
	}
	return operator.NewBatchOwning(s, len(g.cols[0]), arrs...)
}

// usesChanges reports whether stage op's state versions come from its
// change hand-over: it offers one and its state is plain int64 columns.
// The marker lesson fingerprints whole snapshots and keeps Snapshot.
func (c *coordinator) usesChanges(op operator.Operator) bool {
	cs, ok := op.(operator.ChangeSnapshotter)
	return ok && state.Diffable(cs.StateSchema()) && c.marker() == nil
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

// takeChanges is takeSnapshot for a stage that hands over changes: it
// patches the worker's base and records per changed group an edit or the
// group whole.
func (w *worker) takeChanges(si int, alloc memory.Allocator) (*stageSnap, error) {
	op := w.ops[si].(operator.ChangeSnapshotter)
	if seq := w.durableSeq[si]; seq > 0 {
		op.AckChanges(seq)
	}
	hc, err := op.SnapshotChanges()
	if err != nil {
		return nil, err
	}
	defer operator.ReleaseChanges(hc)
	w.takenSeq[si] = hc.Seq
	schema := op.StateSchema()
	s := &stageSnap{si: si, worker: w, patched: true, schema: schema}
	base := &w.pbase[si]
	for _, g := range hc.Groups {
		if g.KeyGroup < 0 || g.KeyGroup >= keygroup.Count || !g.Batch.Schema().Equal(schema) {
			s.release()
			return nil, fmt.Errorf("change hand-over: key group %d with schema %s, want %s", g.KeyGroup, g.Batch.Schema(), schema)
		}
		var ch *groupDiff
		if g.Entries {
			ch, err = patchEntries(base, g, hc.KeyColumn, alloc)
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
	ob := old.batch(g.Batch.Schema())
	defer ob.Release()
	return diffGroup(ob, operator.KeyGroupState{KeyGroup: g.KeyGroup, Batch: g.Batch}, alloc)
}

// patchEntries writes g's entries into the base of their group in place
// (new ones at its end) and returns the edit that does the same to the
// stored version, or nil when no entry differs from the base.
func patchEntries(base *[keygroup.Count]*patchGroup, g operator.GroupChange, keyCol int, alloc memory.Allocator) (*groupDiff, error) {
	vals, ok := state.Int64Columns(g.Batch)
	if !ok || keyCol < 0 || keyCol >= len(vals) {
		return nil, fmt.Errorf("entries of schema %s keyed by column %d are not plain int64 columns", g.Batch.Schema(), keyCol)
	}
	pg := base[g.KeyGroup]
	if pg == nil {
		pg = &patchGroup{cols: make([][]int64, len(vals))}
		base[g.KeyGroup] = pg
	}
	if pg.index == nil {
		pg.index = make(map[int64]int32, pg.rows()+int(g.Batch.NumRows()))
		for r, k := range pg.cols[keyCol] {
			pg.index[k] = int32(r)
		}
	}
	baseRows := pg.rows()
	type replaced struct{ pos, row int }
	var repl []replaced
	var added []int
	keys := vals[keyCol]
	for r, k := range keys {
		pos, ok := pg.index[k]
		if !ok {
			pg.index[k] = int32(pg.rows())
			for c := range vals {
				pg.cols[c] = append(pg.cols[c], vals[c][r])
			}
			added = append(added, r)
			continue
		}
		same := true
		for c := range vals {
			same = same && pg.cols[c][pos] == vals[c][r]
		}
		if same {
			continue // handed over again (a version not acknowledged)
		}
		for c := range vals {
			pg.cols[c][pos] = vals[c][r]
		}
		repl = append(repl, replaced{int(pos), r})
	}
	if pg.rows() != g.Rows || len(pg.index) != pg.rows() {
		return nil, fmt.Errorf("the operator holds %d entries, the worker's copy of its state %d (%d distinct keys)", g.Rows, pg.rows(), len(pg.index))
	}
	n := len(repl) + len(added)
	if n == 0 {
		return nil, nil
	}
	d := &groupDiff{kgChange{kg: g.KeyGroup}, int64(n)}
	if baseRows == 0 || 2*n > pg.rows() {
		return d, nil // mostly new: whole is smaller and ends the chain
	}
	slices.SortFunc(repl, func(a, b replaced) int { return a.pos - b.pos })
	uni := uniformColumn(g.Batch.Schema())
	take := make([]int, 0, n)
	var w state.ScriptWriter
	at := 0
	for _, x := range repl {
		w.Add(state.OpCopy, x.pos-at)
		w.Add(state.OpSkip, 1)
		w.Add(state.OpTake, 1)
		take = append(take, x.row)
		at = x.pos + 1
	}
	w.Add(state.OpCopy, baseRows-at)
	w.Add(state.OpTake, len(added))
	take = append(take, added...)
	if uni >= 0 {
		// Apply gives every row the first stored row's value of the
		// uniform column; the base follows.
		v := vals[uni][take[0]]
		for i := range pg.cols[uni] {
			pg.cols[uni][i] = v
		}
	}
	rows, err := state.Gather(g.Batch, take, alloc)
	if err != nil {
		return nil, err
	}
	nb := pg.batch(g.Batch.Schema())
	crc := state.ValuesCRC(nb, uni)
	nb.Release()
	d.rows = rows
	d.edit = &state.Edit{KeyGroup: g.KeyGroup, BaseRows: baseRows, ResultRows: pg.rows(), ResultCRC: crc, Script: w.Bytes()}
	return d, nil
}

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
