package state_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var deltaSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "watermark", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// evolve returns the next version of rows: some entries changed, some
// removed, some added (at random places, as a hash table inserts), and
// the uniform watermark moved on.
func evolve(r *rand.Rand, rows [][]int64, nextKey *int64) [][]int64 {
	wm := int64(0)
	if len(rows) > 0 {
		wm = rows[0][2]
	}
	wm += r.Int64N(3)
	var out [][]int64
	for _, row := range rows {
		switch p := r.IntN(100); {
		case p < 5: // removed
		case p < 20:
			out = append(out, []int64{row[0], row[1] + 1 + r.Int64N(5), wm})
		default:
			out = append(out, []int64{row[0], row[1], wm})
		}
		if r.IntN(100) < 8 {
			*nextKey++
			out = append(out, []int64{*nextKey, 1, wm})
		}
	}
	if r.IntN(10) == 0 && len(out) > 2 {
		// Now and then a rehash: the order changes.
		r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	}
	return out
}

func batchRows(b arrow.RecordBatch) [][]int64 {
	out := make([][]int64, b.NumRows())
	for i := range out {
		for c := 0; c < int(b.NumCols()); c++ {
			out[i] = append(out[i], b.Column(c).(*array.Int64).Value(i))
		}
	}
	return out
}

func equalIgnoring(a, b [][]int64, uniform int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for c := range a[i] {
			if c != uniform && a[i][c] != b[i][c] {
				return false
			}
		}
	}
	return true
}

// TestDiffApplyRebuilds: over a seeded random history of changes,
// removals, additions and reorderings, every edit Diff makes, stored in a
// delta object and decoded again, rebuilds the next version exactly (the
// uniform column taking the stored rows' value), and stores no more rows
// than changed when the order is kept.
func TestDiffApplyRebuilds(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const uni = 2
	var rows [][]int64
	nextKey := int64(0)
	for i := 0; i < 200; i++ {
		nextKey++
		rows = append(rows, []int64{nextKey, 1, 0})
	}
	for step := 0; step < 60; step++ {
		next := evolve(r, rows, &nextKey)
		base := optest.Batch(mem, deltaSchema, rows)
		nb := optest.Batch(mem, deltaSchema, next)
		script, take, same, ok := state.Diff(base, nb, uni)
		if !ok {
			t.Fatalf("seed %d step %d: int64 state not diffable", seed, step)
		}
		if same != equalIgnoring(rows, next, uni) {
			t.Fatalf("seed %d step %d: same=%v, but the rows say otherwise", seed, step, same)
		}
		stored, err := state.Gather(nb, take, mem)
		if err != nil {
			t.Fatal(err)
		}
		e := state.Edit{KeyGroup: 9, BaseRows: len(rows), ResultRows: len(next), ResultCRC: state.ValuesCRC(nb, uni), Script: script}
		if step%2 == 1 { // every other edit checked as a patching writer checks it
			e.ResultCRC, e.RowSum = state.RowsChecksum(nb, uni), true
		}
		var buf bytes.Buffer
		if err := state.EncodeDelta(&buf, "count/s0", []operator.KeyGroupState{{KeyGroup: 9, Batch: stored}}, []state.Edit{e}); err != nil {
			t.Fatal(err)
		}
		stored.Release()
		_, parts, edits, err := state.DecodeDelta(buf.Bytes(), mem)
		if err != nil || len(parts) != 1 || len(edits) != 1 {
			t.Fatalf("seed %d step %d: decode: %d parts, %d edits, %v", seed, step, len(parts), len(edits), err)
		}
		if edits[9].RowSum != e.RowSum {
			t.Fatalf("seed %d step %d: RowSum %v decoded as %v", seed, step, e.RowSum, edits[9].RowSum)
		}
		got, err := state.Apply(base, parts[0].Batch, edits[9], uni, mem)
		operator.ReleaseStates(parts)
		if err != nil {
			t.Fatalf("seed %d step %d: apply: %v (replay: REWIND_TEST_SEED=%d go test -run TestDiffApplyRebuilds ./dataflow/state/)", seed, step, err, seed)
		}
		gr := batchRows(got)
		got.Release()
		if !equalIgnoring(gr, next, uni) {
			t.Fatalf("seed %d step %d: rebuilt state differs from the version it was made from (replay: REWIND_TEST_SEED=%d go test -run TestDiffApplyRebuilds ./dataflow/state/)", seed, step, seed)
		}
		if len(take) > 0 && len(gr) > 0 {
			for _, row := range gr {
				if row[uni] != next[0][uni] {
					t.Fatalf("seed %d step %d: uniform column %d after the edit, want %d", seed, step, row[uni], next[0][uni])
				}
			}
		}
		base.Release()
		nb.Release()
		rows = next
	}
}

// TestDiffStoresOnlyChanges: with the order kept (no rehash), one changed
// entry in a thousand costs one stored row and a few script bytes.
func TestDiffStoresOnlyChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var a, b [][]int64
	for k := int64(0); k < 1000; k++ {
		a = append(a, []int64{k, 1, 5})
		c := int64(1)
		if k%100 == 7 {
			c = 2
		}
		b = append(b, []int64{k, c, 6})
		if k == 500 {
			b = append(b, []int64{5000, 1, 6}) // one new entry
		}
	}
	base, next := optest.Batch(mem, deltaSchema, a), optest.Batch(mem, deltaSchema, b)
	defer base.Release()
	defer next.Release()
	script, take, same, _ := state.Diff(base, next, 2)
	if same || len(take) != 11 || len(script) > 64 {
		t.Fatalf("10 changed and 1 new entry: same=%v, %d rows stored, %d script bytes", same, len(take), len(script))
	}
	_, _, same, _ = state.Diff(base, base, 2)
	if !same {
		t.Fatal("a batch differs from itself")
	}
}

// TestDeltaRefusesDamage: every single-byte change and every truncation of
// a delta object fails to decode; an edit applied to a base of another
// version fails instead of loading a wrong state.
func TestDeltaRefusesDamage(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	base := optest.Batch(mem, deltaSchema, [][]int64{{1, 1, 0}, {2, 1, 0}, {3, 1, 0}})
	next := optest.Batch(mem, deltaSchema, [][]int64{{1, 1, 1}, {2, 2, 1}, {3, 1, 1}})
	defer base.Release()
	defer next.Release()
	script, take, _, _ := state.Diff(base, next, 2)
	stored, err := state.Gather(next, take, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer stored.Release()
	e := state.Edit{KeyGroup: 4, BaseRows: 3, ResultRows: 3, ResultCRC: state.ValuesCRC(next, 2), Script: script}
	var buf bytes.Buffer
	if err := state.EncodeDelta(&buf, "count/s1", []operator.KeyGroupState{{KeyGroup: 4, Batch: stored}}, []state.Edit{e}); err != nil {
		t.Fatal(err)
	}
	blob := buf.Bytes()
	for i := range blob {
		for _, flip := range []byte{0x01, 0x80} {
			d := bytes.Clone(blob)
			d[i] ^= flip
			if _, parts, _, err := state.DecodeDelta(d, mem); err == nil {
				operator.ReleaseStates(parts)
				t.Fatalf("byte %d ^ %#x: damaged delta decoded", i, flip)
			} else if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("byte %d: error %v does not wrap ErrCorrupt", i, err)
			}
		}
	}
	for n := 0; n < len(blob); n++ {
		if _, parts, _, err := state.DecodeDelta(blob[:n], mem); err == nil {
			operator.ReleaseStates(parts)
			t.Fatalf("delta truncated to %d of %d bytes decoded", n, len(blob))
		}
	}
	// The right edit on the wrong base: same row count, other values.
	other := optest.Batch(mem, deltaSchema, [][]int64{{1, 1, 0}, {2, 1, 0}, {4, 1, 0}})
	defer other.Release()
	if b, err := state.Apply(other, stored, e, 2, mem); err == nil || !errors.Is(err, state.ErrCorrupt) {
		if b != nil {
			b.Release()
		}
		t.Fatalf("edit applied to another base: %v", err)
	}
	short := optest.Batch(mem, deltaSchema, [][]int64{{1, 1, 0}})
	defer short.Release()
	if _, err := state.Apply(short, stored, e, 2, mem); err == nil {
		t.Fatal("edit applied to a base of another size")
	}
}

// TestRowSumChecksRowsAndPositions: RowsChecksum changes with any value,
// with the row order and with the row count, updates row by row as a
// patching writer updates it, and an edit checked by it refuses a result
// it was not made for.
func TestRowSumChecksRowsAndPositions(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := [][]int64{{1, 10, 100}, {2, 20, 200}, {3, 30, 300}}
	sum := func(rows [][]int64) uint32 {
		b := optest.Batch(mem, deltaSchema, rows)
		defer b.Release()
		return state.RowsChecksum(b, -1)
	}
	base := sum(rows)
	for name, other := range map[string][][]int64{
		"value":   {{1, 10, 100}, {2, 21, 200}, {3, 30, 300}},
		"swapped": {{2, 20, 200}, {1, 10, 100}, {3, 30, 300}},
		"shorter": {{1, 10, 100}, {2, 20, 200}},
	} {
		if sum(other) == base {
			t.Errorf("%s: same checksum %08x", name, base)
		}
	}
	// Row by row: replace row 1, append a row.
	cols := [][]int64{{1, 2, 3}, {10, 20, 30}, {100, 200, 300}}
	s := state.RowsChecksumCols(cols, 3, -1)
	s -= state.RowHash(cols, 1, -1)
	cols[1][1] = 21
	s += state.RowHash(cols, 1, -1)
	for c, v := range []int64{4, 40, 400} {
		cols[c] = append(cols[c], v)
	}
	s += state.RowCountShare + state.RowHash(cols, 3, -1)
	want := sum([][]int64{{1, 10, 100}, {2, 21, 200}, {3, 30, 300}, {4, 40, 400}})
	if s != want {
		t.Fatalf("updated row by row %08x, computed whole %08x", s, want)
	}
	// An edit replacing row 1 and appending one, applied to a base whose
	// row 0 differs, fails its check.
	var w state.ScriptWriter
	w.Add(state.OpCopy, 1)
	w.Add(state.OpSkip, 1)
	w.Add(state.OpTake, 1)
	w.Add(state.OpCopy, 1)
	w.Add(state.OpTake, 1)
	e := state.Edit{KeyGroup: 3, BaseRows: 3, ResultRows: 4, ResultCRC: want, RowSum: true, Script: w.Bytes()}
	stored := optest.Batch(mem, deltaSchema, [][]int64{{2, 21, 200}, {4, 40, 400}})
	defer stored.Release()
	good := optest.Batch(mem, deltaSchema, rows)
	defer good.Release()
	got, err := state.Apply(good, stored, e, -1, mem)
	if err != nil {
		t.Fatalf("apply to its base: %v", err)
	}
	got.Release()
	// Checked from the base's sum and the changed rows alone: the same
	// verdicts.
	got, gs, err := state.ApplySum(good, stored, e, -1, base, true, mem)
	if err != nil || gs != want {
		t.Fatalf("apply from the base's sum: %08x, %v; want %08x", gs, err, want)
	}
	got.Release()
	if b, _, err := state.ApplySum(good, stored, e, -1, base+1, true, mem); !errors.Is(err, state.ErrCorrupt) {
		if b != nil {
			b.Release()
		}
		t.Fatalf("apply from a wrong base sum: %v, want ErrCorrupt", err)
	}
	// A script that moves rows is checked by a pass over the result.
	var mv state.ScriptWriter
	mv.Add(state.OpSkip, 1)
	mv.Add(state.OpCopy, 2)
	mv.Add(state.OpTake, 2)
	moved := [][]int64{{2, 20, 200}, {3, 30, 300}, {2, 21, 200}, {4, 40, 400}}
	em := state.Edit{KeyGroup: 3, BaseRows: 3, ResultRows: 4, ResultCRC: sum(moved), RowSum: true, Script: mv.Bytes()}
	got, gs, err = state.ApplySum(good, stored, em, -1, base, true, mem)
	if err != nil || gs != sum(moved) {
		t.Fatalf("apply of a moving script: %08x, %v; want %08x", gs, err, sum(moved))
	}
	got.Release()
	bad := optest.Batch(mem, deltaSchema, [][]int64{{1, 11, 100}, {2, 20, 200}, {3, 30, 300}})
	defer bad.Release()
	if b, err := state.Apply(bad, stored, e, -1, mem); err == nil || !errors.Is(err, state.ErrCorrupt) {
		if b != nil {
			b.Release()
		}
		t.Fatalf("apply to another base: %v, want ErrCorrupt", err)
	}
	// One object, one check: mixing is refused.
	var buf bytes.Buffer
	e2 := e
	e2.KeyGroup, e2.RowSum = 4, false
	err = state.EncodeDelta(&buf, "x", []operator.KeyGroupState{{KeyGroup: 3, Batch: stored}, {KeyGroup: 4, Batch: stored}}, []state.Edit{e, e2})
	if err == nil {
		t.Fatal("edits with both checks encoded")
	}
}
