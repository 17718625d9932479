package operator_test

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
)

// restoreFuzzOps are the stateful operators whose Restore takes decoded
// state: keyed aggregation, event-time window, interval join.
var restoreFuzzOps = []func() (operator.Stateful, error){
	func() (operator.Stateful, error) {
		return operator.NewKeyedAgg(winInSchema, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"})
	},
	func() (operator.Stateful, error) { return operator.NewWindowAgg(winInSchema, winSpec(10)) },
	func() (operator.Stateful, error) {
		return operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(5))
	},
}

func openAll(t testing.TB, kind int, mem memory.Allocator) operator.Stateful {
	t.Helper()
	op, err := restoreFuzzOps[kind]()
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Open(operator.Context{Alloc: mem, Parallelism: 1, KeyGroups: keygroup.RangeFor(0, 1)}); err != nil {
		t.Fatal(err)
	}
	return op
}

// realState snapshots operator kind after a little input: its state
// schema, and the snapshot as fuzz input: (key group, rows) pairs and the
// rows' values.
func realState(t testing.TB, kind int) (*arrow.Schema, []byte, []byte) {
	mem := memory.NewGoAllocator()
	op := openAll(t, kind, mem)
	defer op.Close()
	var out optest.Collector
	defer out.Release()
	in := optest.Batch(mem, winInSchema, [][]int64{{1, 7, 3, 100}, {2, 8, 4, 101}})
	defer in.Release()
	for port := range 2 {
		if kind < 2 && port == 1 {
			break
		}
		if err := op.Process(port, in, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.Flush(&out); err != nil {
		t.Fatal(err)
	}
	parts, err := op.Snapshot()
	if err != nil || len(parts) == 0 {
		t.Fatalf("snapshot: %d parts, %v", len(parts), err)
	}
	defer operator.ReleaseStates(parts)
	var kgs, vals []byte
	for _, p := range parts {
		kgs = append(kgs, byte(p.KeyGroup), byte(p.Batch.NumRows()))
		for _, r := range optest.Rows(p.Batch) {
			for _, v := range r {
				vals = binary.LittleEndian.AppendUint64(vals, uint64(v))
			}
		}
	}
	return parts[0].Batch.Schema(), kgs, vals
}

// snapshotRows is a snapshot as key group -> sorted rows.
func snapshotRows(t *testing.T, op operator.Stateful) map[int][][]int64 {
	t.Helper()
	parts, err := op.Snapshot()
	if err != nil {
		t.Fatalf("snapshot after restore: %v", err)
	}
	defer operator.ReleaseStates(parts)
	out := map[int][][]int64{}
	for _, p := range parts {
		out[p.KeyGroup] = optest.Sorted(optest.Rows(p.Batch))
	}
	return out
}

// FuzzOperatorRestore: state that passed the checksum but holds arbitrary
// values (rows in any key group, repeated keys, negative counts, key groups
// out of range) is either refused by Restore with an error, or restored so
// that its snapshot restores into a fresh instance and snapshots the same;
// never a panic, and nothing leaked.
func FuzzOperatorRestore(f *testing.F) {
	schemas := map[int]*arrow.Schema{}
	for kind := range restoreFuzzOps {
		schema, kgs, vals := realState(f, kind)
		schemas[kind] = schema
		f.Add(uint8(kind), kgs, vals)
		f.Add(uint8(kind), []byte{kgs[0], 1, kgs[0], 1}, vals) // one key group twice
		f.Add(uint8(kind), []byte{200, 1}, vals)               // out of range
	}
	f.Fuzz(func(t *testing.T, kindB uint8, kgs, vals []byte) {
		kind := int(kindB) % len(restoreFuzzOps)
		schema := schemas[kind]
		if len(kgs) < 2 || len(kgs) > 16 {
			return
		}
		ncols := schema.NumFields()
		nums := make([]int64, len(vals)/8)
		for i := range nums {
			nums[i] = int64(binary.LittleEndian.Uint64(vals[8*i:]))
		}
		rows := make([][]int64, len(nums)/ncols)
		for i := range rows {
			rows[i] = nums[i*ncols : (i+1)*ncols]
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		var parts []operator.KeyGroupState
		next := 0
		for i := 0; i+1 < len(kgs); i += 2 {
			n := min(int(kgs[i+1]), len(rows)-next)
			parts = append(parts, operator.KeyGroupState{KeyGroup: int(kgs[i]) % (keygroup.Count + 2),
				Batch: optest.Batch(mem, schema, rows[next:next+n])})
			next += n
		}
		defer operator.ReleaseStates(parts)

		op := openAll(t, kind, mem)
		defer op.Close()
		if err := op.Restore(parts); err != nil {
			return
		}
		first := snapshotRows(t, op)
		snap, err := op.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		defer operator.ReleaseStates(snap)
		again := openAll(t, kind, mem)
		defer again.Close()
		if err := again.Restore(snap); err != nil {
			t.Fatalf("a restored operator's own snapshot is refused: %v", err)
		}
		second := snapshotRows(t, again)
		if len(first) != len(second) {
			t.Fatalf("snapshot has %d key groups, after restoring it %d", len(first), len(second))
		}
		for kg, r := range first {
			if !slices.EqualFunc(r, second[kg], slices.Equal) {
				t.Fatalf("key group %d: %v, after restoring its snapshot %v", kg, r, second[kg])
			}
		}
	})
}
