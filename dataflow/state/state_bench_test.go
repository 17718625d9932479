package state_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
)

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// benchParts is ~1M rows of three int64 columns over 128 key groups.
func benchParts() []operator.KeyGroupState {
	parts := make([]operator.KeyGroupState, 128)
	for kg := range parts {
		const n = 1_000_000 / 128
		cols := make([]arrow.Array, 3)
		for c := range cols {
			arr, vals := operator.AllocInt64(memory.DefaultAllocator, n)
			for i := range vals {
				vals[i] = int64(kg*n + i*c)
			}
			cols[c] = arr
		}
		parts[kg] = operator.KeyGroupState{KeyGroup: kg, Batch: operator.NewBatchOwning(benchSchema, n, cols...)}
	}
	return parts
}

// BenchmarkEncode is the codec alone: IPC into a reused buffer plus CRC32C.
func BenchmarkEncode(b *testing.B) {
	parts := benchParts()
	defer operator.ReleaseStates(parts)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		if err := state.EncodeAll(&buf, "op", parts); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(buf.Len()))
	}
}

// BenchmarkDecode is the codec alone: CRC32C check and IPC decode, with a
// copy into allocator memory or none.
func BenchmarkDecode(b *testing.B) {
	parts := benchParts()
	var buf bytes.Buffer
	err := state.EncodeAll(&buf, "op", parts)
	operator.ReleaseStates(parts)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(buf.Len()))
		for b.Loop() {
			_, out, err := state.DecodeAll(buf.Bytes(), memory.DefaultAllocator)
			if err != nil {
				b.Fatal(err)
			}
			operator.ReleaseStates(out)
		}
	})
	b.Run("shared", func(b *testing.B) {
		b.SetBytes(int64(buf.Len()))
		for b.Loop() {
			_, out, err := state.DecodeAllShared(buf.Bytes())
			if err != nil {
				b.Fatal(err)
			}
			operator.ReleaseStates(out)
		}
	})
}
