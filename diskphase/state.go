package diskphase

// This file holds an operator's state as a table: snapshotting its
// per-key-group state into columns, and restoring it into a freshly
// opened operator.

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// snapshotColumns flushes nothing (the caller has) and turns the
// operator's per-key-group state into one table: _kg, then the state
// columns, key groups ascending.
func snapshotColumns(st operator.Stateful) ([]string, [][]int64, error) {
	names, err := stateNames(st)
	if err != nil {
		return nil, nil, err
	}
	parts, err := st.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	defer operator.ReleaseStates(parts)
	slices.SortStableFunc(parts, func(a, b operator.KeyGroupState) int { return a.KeyGroup - b.KeyGroup })
	cols := make([][]int64, len(names))
	for _, p := range parts {
		n := int(p.Batch.NumRows())
		for i := 0; i < n; i++ {
			cols[0] = append(cols[0], int64(p.KeyGroup))
		}
		for c := 1; c < len(names); c++ {
			arr, ok := p.Batch.Column(c - 1).(*array.Int64)
			if !ok || arr.NullN() > 0 {
				return nil, nil, fmt.Errorf("state column %q is not a null-free int64 column", names[c])
			}
			cols[c] = append(cols[c], arr.Int64Values()...)
		}
	}
	return names, cols, nil
}

// restoreState loads a state table into the freshly opened first operator
// of ch.
func (a *attempt) restoreState(ctx context.Context, ch *operator.Chain, ref FileRef, producer UnitID) error {
	st := ch.Op(0).(operator.Stateful)
	x := a.x
	names, err := stateNames(st)
	if err != nil {
		return err
	}
	data, err := x.fetch(ctx, ref, producer)
	if err != nil {
		return err
	}
	cols := newColumns(names)
	if _, err := decodeFile(data, ref, producer, int64Schema(names), x, cols.add); err != nil {
		return err
	}
	kgs := cols.cols[0]
	stateSchema := st.StateSchema()
	var parts []operator.KeyGroupState
	defer func() { operator.ReleaseStates(parts) }()
	for lo := 0; lo < len(kgs); {
		hi := lo
		for hi < len(kgs) && kgs[hi] == kgs[lo] {
			hi++
		}
		kg := kgs[lo]
		if kg < 0 || kg >= keygroup.Count || (len(parts) > 0 && int64(parts[len(parts)-1].KeyGroup) >= kg) {
			return &fileBadError{producer: producer, file: ref.Name, reason: fmt.Sprintf("has key group %d out of order", kg)}
		}
		arrs := make([]arrow.Array, len(names)-1)
		for c := range arrs {
			arr, vals := operator.AllocInt64(x.env.Alloc, hi-lo)
			copy(vals, cols.cols[c+1][lo:hi])
			arrs[c] = arr
		}
		parts = append(parts, operator.KeyGroupState{KeyGroup: int(kg), Batch: operator.NewBatchOwning(stateSchema, hi-lo, arrs...)})
		lo = hi
	}
	return ch.Restore(0, parts)
}
