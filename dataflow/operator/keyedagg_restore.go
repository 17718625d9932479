package operator

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// kaggRestoreRuns splits parts into at most n contiguous runs of about
// kaggRestorePerGoroutine keys or more each. It returns parts whole when
// a key group appears twice: those parts share a table and must not be
// restored concurrently (restorePart then reports the repeated keys).
func kaggRestoreRuns(parts []KeyGroupState, n int) [][]KeyGroupState {
	total := 0
	var seen [keygroup.Count]bool
	for _, p := range parts {
		if p.Batch != nil {
			total += int(p.Batch.NumRows())
		}
		if p.KeyGroup >= 0 && p.KeyGroup < keygroup.Count {
			if seen[p.KeyGroup] {
				return [][]KeyGroupState{parts}
			}
			seen[p.KeyGroup] = true
		}
	}
	n = min(n, total/kaggRestorePerGoroutine, len(parts))
	if n <= 1 {
		return [][]KeyGroupState{parts}
	}
	runs := make([][]KeyGroupState, 0, n)
	start, acc := 0, 0
	for i, p := range parts {
		if p.Batch != nil {
			acc += int(p.Batch.NumRows())
		}
		// Close the run once it holds its share of all keys so far.
		if len(runs) < n-1 && acc*n >= total*(len(runs)+1) {
			runs = append(runs, parts[start:i+1])
			start = i + 1
		}
	}
	if start < len(parts) {
		runs = append(runs, parts[start:])
	}
	return runs
}

func (a *keyedAgg) restoreParts(parts []KeyGroupState) error {
	for _, p := range parts {
		if err := a.restorePart(p); err != nil {
			return fmt.Errorf("keyed aggregation: restoring key group %d: %w", p.KeyGroup, err)
		}
	}
	return nil
}

// restorePart inserts one key group. Each part's table is allocated (and
// cleared) right before its keys go in, so the inserts hit cache.
func (a *keyedAgg) restorePart(p KeyGroupState) error {
	if p.KeyGroup < 0 || p.KeyGroup >= keygroup.Count || a.tables[p.KeyGroup] == nil {
		return fmt.Errorf("key group not owned by this instance (owns [%d,%d))", a.owned.Start, a.owned.End)
	}
	if p.Batch == nil {
		return errors.New("no batch")
	}
	if !p.Batch.Schema().Equal(kaggStateSchema) {
		return fmt.Errorf("state schema %s, want %s", helpSchemaString(p.Batch.Schema()), helpSchemaString(kaggStateSchema))
	}
	var cols [3][]int64
	for c := range cols {
		arr := p.Batch.Column(c).(*array.Int64)
		if arr.NullN() > 0 {
			return fmt.Errorf("column %q has nulls", p.Batch.ColumnName(c))
		}
		cols[c] = arr.Int64Values()
	}
	t := a.tables[p.KeyGroup]
	fresh := t.n == 0
	t.reserve(len(cols[0]), a.epoch)
	if fresh {
		t.touchEmpty()
	}
	return t.insertNew(p.KeyGroup, cols[0], cols[1], cols[2])
}
