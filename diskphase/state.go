package diskphase

// This file holds an operator's state as a table: writing its per-key-group
// state as chunks of a table, and restoring it into a freshly opened
// operator from them.

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// writeState snapshots the operator (the caller has flushed it) and writes
// its state as one table in chunks of about budget rows: _kg, then the
// state columns, key groups ascending. A chunk ends only where a key group
// does, so a key group is never split and restoreState can insist that
// key groups ascend strictly over all the chunks. What the unit holds
// beyond the operator's own snapshot is one chunk's columns and its
// encoded file, not a second copy of the whole state.
func (a *attempt) writeState(st operator.Stateful, pipe *putPipe, budget int, name func(chunk int) string) (FileRef, error) {
	names, err := stateNames(st)
	if err != nil {
		return FileRef{}, err
	}
	parts, err := st.Snapshot()
	if err != nil {
		return FileRef{}, err
	}
	defer operator.ReleaseStates(parts)
	slices.SortStableFunc(parts, func(a, b operator.KeyGroupState) int { return a.KeyGroup - b.KeyGroup })
	pt := newPartitioner(names, 1, 0, 1)
	cw := newChunkWriter(a, pipe, names, 1, budget, func(_, k int) string { return name(k) })
	cols := pt.parts[0].cols
	for _, p := range parts {
		n := int(p.Batch.NumRows())
		for range n {
			cols[0] = append(cols[0], int64(p.KeyGroup))
		}
		for c := 1; c < len(names); c++ {
			arr, ok := p.Batch.Column(c - 1).(*array.Int64)
			if !ok || arr.NullN() > 0 {
				return FileRef{}, fmt.Errorf("state column %q is not a null-free int64 column", names[c])
			}
			cols[c] = append(cols[c], arr.Int64Values()...)
		}
		if err := cw.maybeWrite(pt); err != nil {
			return FileRef{}, err
		}
	}
	files, err := cw.finish(pt)
	if err != nil {
		return FileRef{}, err
	}
	return files[0], nil
}

// restoreState loads a state table, chunk by chunk, into the freshly
// opened first operator of ch.
func (a *attempt) restoreState(ctx context.Context, ch *operator.Chain, ref FileRef, producer UnitID) error {
	st := ch.Op(0).(operator.Stateful)
	x := a.x
	names, err := stateNames(st)
	if err != nil {
		return err
	}
	stateSchema := st.StateSchema()
	var parts []operator.KeyGroupState
	defer func() { operator.ReleaseStates(parts) }()
	cols := newColumns(names)
	for _, c := range ref.chunks() {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		data, err := x.fetch(ctx, c, producer)
		if err != nil {
			return err
		}
		cols.reset()
		if _, err := decodeFile(data, c, producer, int64Schema(names), x, cols.add); err != nil {
			return err
		}
		kgs := cols.cols[0]
		for lo := 0; lo < len(kgs); {
			hi := lo
			for hi < len(kgs) && kgs[hi] == kgs[lo] {
				hi++
			}
			kg := kgs[lo]
			if kg < 0 || kg >= keygroup.Count || (len(parts) > 0 && int64(parts[len(parts)-1].KeyGroup) >= kg) {
				return &fileBadError{producer: producer, file: c.Name, reason: fmt.Sprintf("has key group %d out of order", kg)}
			}
			arrs := make([]arrow.Array, len(names)-1)
			for i := range arrs {
				arr, vals := operator.AllocInt64(x.env.Alloc, hi-lo)
				copy(vals, cols.cols[i+1][lo:hi])
				arrs[i] = arr
			}
			parts = append(parts, operator.KeyGroupState{KeyGroup: int(kg), Batch: operator.NewBatchOwning(stateSchema, hi-lo, arrs...)})
			lo = hi
		}
	}
	return ch.Restore(0, parts)
}
