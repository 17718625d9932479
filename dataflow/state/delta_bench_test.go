package state_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// BenchmarkDeltaCommit is the CPU work of one worker's delta per batch in
// the issue-16 run (keyed-count, 100k keys over 2 workers, ~15k records a
// batch): 64 key groups of 780 entries, about 7% of them changed; diff,
// gather, checksum and encode.
func BenchmarkDeltaCommit(b *testing.B) {
	kagg := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	const groups, entries = 64, 780
	var bases, nexts []arrow.RecordBatch
	for g := 0; g < groups; g++ {
		var a, n [][]int64
		for k := 0; k < entries; k++ {
			a = append(a, []int64{int64(g*entries + k), 3, 9})
			c := int64(3)
			if (k*7919+g)%100 < 7 {
				c = 4
			}
			n = append(n, []int64{int64(g*entries + k), c, 9})
		}
		bases = append(bases, optest.Batch(memory.DefaultAllocator, kagg, a))
		nexts = append(nexts, optest.Batch(memory.DefaultAllocator, kagg, n))
	}
	var buf bytes.Buffer
	b.ResetTimer()
	for b.Loop() {
		var parts []operator.KeyGroupState
		var edits []state.Edit
		for g := range bases {
			script, take, _, _ := state.Diff(bases[g], nexts[g], -1)
			rows, _ := state.Gather(nexts[g], take, memory.DefaultAllocator)
			parts = append(parts, operator.KeyGroupState{KeyGroup: g, Batch: rows})
			edits = append(edits, state.Edit{KeyGroup: g, BaseRows: entries, ResultRows: entries, ResultCRC: state.ValuesCRC(nexts[g], -1), Script: script})
		}
		buf.Reset()
		if err := state.EncodeDelta(&buf, "count/s0", parts, edits); err != nil {
			b.Fatal(err)
		}
		operator.ReleaseStates(parts)
		b.SetBytes(int64(buf.Len()))
	}
}
