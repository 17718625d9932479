package microbatch

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var patchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// TestPatchEntriesEditRebuildsTheBase hands over random entries, round
// after round, and checks that each edit patchEntries returns, applied to
// the previous stored version the way a restore applies it, gives exactly
// the worker's patched base, and that the base holds what was handed over.
// The hand-overs replace runs of adjacent rows, scattered rows, entries
// unchanged (handed over again) and new keys.
func TestPatchEntriesEditRebuildsTheBase(t *testing.T) {
	const seed = 16
	rng := rand.New(rand.NewPCG(seed, 3))
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var base [keygroup.Count]*patchGroup
	var sc patchScratch
	want := map[int64][2]int64{} // key -> count, sum
	var stored arrow.RecordBatch // the version the last edit rebuilt (or whole)
	defer func() {
		if stored != nil {
			stored.Release()
		}
	}()
	var sum uint32
	haveSum := false
	edits := 0
	for round := range 200 {
		// Most rounds touch few keys, so the result is an edit.
		n := 1 + rng.IntN(40)
		if round%10 == 0 {
			n = 1 + rng.IntN(400)
		}
		picked := map[int64]bool{}
		var rows [][3]int64
		var run []int64 // keys of adjacent stored rows, handed over next
		for len(rows) < n {
			if len(run) == 0 && base[5] != nil && rng.IntN(4) == 0 {
				p := rng.IntN(base[5].rows())
				run = slices.Clone(base[5].cols[0][p:min(base[5].rows(), p+1+rng.IntN(6))])
			}
			var k int64
			if len(run) > 0 {
				k, run = run[0], run[1:]
			} else {
				k = int64(rng.IntN(1000))
			}
			if picked[k] {
				continue
			}
			picked[k] = true
			v := want[k]
			if rng.IntN(5) != 0 { // else handed over again unchanged
				v = [2]int64{v[0] + 1, v[1] + int64(rng.IntN(100))}
			}
			if v == ([2]int64{}) {
				v = [2]int64{1, 7}
			}
			want[k] = v
			rows = append(rows, [3]int64{k, v[0], v[1]})
		}
		b := patchBatch(rows)
		g := operator.GroupChange{KeyGroup: 5, Batch: b, Entries: true, Rows: len(want)}
		d, err := patchEntries(&base, g, 0, &sc)
		b.Release()
		if err != nil {
			t.Fatalf("seed %d round %d: %v (replay: go test -run TestPatchEntriesEditRebuildsTheBase ./microbatch/)", seed, round, err)
		}
		pg := base[5]
		cur := pg.batch(patchSchema)
		switch {
		case d == nil:
			// Nothing differed: the stored version is still the base.
			if stored == nil || !equalRows(stored, cur, -1) {
				t.Fatalf("seed %d round %d: no edit, but the base changed", seed, round)
			}
		case d.edit == nil:
			// Stored whole: the next edits build on this.
			if stored != nil {
				stored.Release()
			}
			stored = copyBatch(cur, alloc)
			sum, haveSum = state.RowsChecksum(stored, -1), true
		default:
			edits++
			next, nsum, err := state.ApplySum(stored, d.rows, *d.edit, -1, sum, haveSum, alloc)
			d.rows.Release()
			if err != nil {
				t.Fatalf("seed %d round %d: applying the edit: %v", seed, round, err)
			}
			if !equalRows(next, cur, -1) {
				t.Fatalf("seed %d round %d: the edit rebuilds another state than the worker's base", seed, round)
			}
			stored.Release()
			stored, sum = next, nsum
		}
		cur.Release()
		// The base holds exactly the entries handed over so far.
		if pg.rows() != len(want) {
			t.Fatalf("seed %d round %d: base has %d rows, want %d", seed, round, pg.rows(), len(want))
		}
		for r := range pg.rows() {
			k := pg.cols[0][r]
			if got := [2]int64{pg.cols[1][r], pg.cols[2][r]}; got != want[k] {
				t.Fatalf("seed %d round %d: key %d holds %v, want %v", seed, round, k, got, want[k])
			}
		}
		if slices.ContainsFunc(sc.bits, func(w uint64) bool { return w != 0 }) {
			t.Fatalf("seed %d round %d: marks left in the scratch", seed, round)
		}
	}
	if edits < 100 {
		t.Fatalf("seed %d: only %d of 200 rounds made an edit: the test did not exercise edits", seed, edits)
	}
}

// TestPatchEntriesRefusesAKeyTwice: a hand-over naming one key twice has
// no single edit; it is refused instead of writing a script that does not
// rebuild.
func TestPatchEntriesRefusesAKeyTwice(t *testing.T) {
	var base [keygroup.Count]*patchGroup
	var sc patchScratch
	first := patchBatch([][3]int64{{1, 1, 1}, {2, 1, 1}, {3, 1, 1}})
	defer first.Release()
	if _, err := patchEntries(&base, operator.GroupChange{KeyGroup: 0, Batch: first, Entries: true, Rows: 3}, 0, &sc); err != nil {
		t.Fatal(err)
	}
	for _, rows := range [][][3]int64{{{2, 2, 2}, {2, 3, 3}}, {{9, 1, 1}, {9, 2, 2}}} {
		b := patchBatch(rows)
		_, err := patchEntries(&base, operator.GroupChange{KeyGroup: 0, Batch: b, Entries: true, Rows: 4}, 0, &sc)
		b.Release()
		if err == nil {
			t.Fatalf("hand-over %v: want an error for a key handed over twice", rows)
		}
	}
}

func patchBatch(rows [][3]int64) arrow.RecordBatch {
	cols := make([][]int64, 3)
	for c := range cols {
		cols[c] = make([]int64, len(rows))
		for r := range rows {
			cols[c][r] = rows[r][c]
		}
	}
	return int64Batch(patchSchema, cols)
}

// copyBatch copies b's int64 columns into memory from alloc.
func copyBatch(b arrow.RecordBatch, alloc memory.Allocator) arrow.RecordBatch {
	arrs := make([]arrow.Array, b.NumCols())
	for c := range arrs {
		bld := array.NewInt64Builder(alloc)
		bld.AppendValues(b.Column(c).(*array.Int64).Int64Values(), nil)
		arrs[c] = bld.NewArray()
		bld.Release()
	}
	return operator.NewBatchOwning(b.Schema(), int(b.NumRows()), arrs...)
}

// TestPosIndexLargeAndGrowing fills an index from empty past the size at
// which its slots are mapped outside the heap (growing through mapped
// sizes) and checks every key finds its row, keys not
// put find none, and a key put again keeps its first row.
func TestPosIndexLargeAndGrowing(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	keys := make([]int64, 0, 100000)
	seen := map[int64]bool{}
	x := newPosIndex(0)
	for len(keys) < cap(keys) {
		k := r.Int64()
		if seen[k] {
			continue
		}
		seen[k] = true
		keys = append(keys, k)
		x.put(keys, len(keys)-1)
	}
	if !x.mem.Mapped() || x.n != len(keys) {
		t.Fatalf("seed %d: %d keys: index of %d slots, mapped %v, counts %d keys", seed, len(keys), len(x.slots), x.mem.Mapped(), x.n)
	}
	for row, k := range keys {
		if got := x.lookup(keys, k); got != row {
			t.Fatalf("seed %d: key %d found at row %d, want %d", seed, k, got, row)
		}
	}
	dup := append(keys, keys[17])
	x.put(dup, len(dup)-1)
	if got := x.lookup(dup, keys[17]); got != 17 || x.n != len(keys) {
		t.Fatalf("seed %d: a key put again moved to row %d (n %d)", seed, got, x.n)
	}
	for range 1000 {
		if k := r.Int64(); !seen[k] && x.lookup(keys, k) != -1 {
			t.Fatalf("seed %d: key %d never put was found", seed, k)
		}
	}
}

// TestPatchColumnsGrowOutsideTheHeap hands over new keys until a group's
// columns are far past the size that is mapped outside Go's heap (growing
// through several mapped sizes), replaces the group whole, and frees the
// base: every value survives each move, the columns end mapped, and
// every mapping is returned.
func TestPatchColumnsGrowOutsideTheHeap(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	var base [keygroup.Count]*patchGroup
	var sc patchScratch
	want := map[int64][2]int64{}
	var next int64
	for len(want) < 60000 {
		var rows [][3]int64
		for range 1 + rng.IntN(5000) {
			v := [2]int64{1 + rng.Int64N(9), rng.Int64N(1000)}
			want[next] = v
			rows = append(rows, [3]int64{next, v[0], v[1]})
			next++
		}
		b := patchBatch(rows)
		d, err := patchEntries(&base, operator.GroupChange{KeyGroup: 3, Batch: b, Entries: true, Rows: len(want)}, 0, &sc)
		b.Release()
		if err != nil {
			t.Fatalf("seed %d, %d keys: %v", seed, len(want), err)
		}
		if d != nil && d.rows != nil {
			d.rows.Release()
		}
	}
	pg := base[3]
	mems := slices.Clone(pg.mem)
	for c, a := range pg.mem {
		if !a.Mapped() || len(pg.cols[c]) != len(want) {
			t.Fatalf("seed %d: column %d of %d rows (want %d), mapped %v", seed, c, len(pg.cols[c]), len(want), a.Mapped())
		}
	}
	for r := range pg.rows() {
		k := pg.cols[0][r]
		if got := [2]int64{pg.cols[1][r], pg.cols[2][r]}; got != want[k] {
			t.Fatalf("seed %d: key %d holds %v, want %v", seed, k, got, want[k])
		}
	}
	// Handed over whole: the group is replaced, the old one freed.
	whole := pg.batch(patchSchema)
	wholeCopy := copyBatch(whole, memory.DefaultAllocator)
	whole.Release()
	if _, err := patchWhole(&base, operator.GroupChange{KeyGroup: 3, Batch: wholeCopy}, memory.DefaultAllocator); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	wholeCopy.Release()
	if base[3] == pg || base[3].rows() != len(want) || pg.cols != nil {
		t.Fatalf("seed %d: after a whole hand-over: a new group %v of %d rows (want %d), the old one freed %v", seed, base[3] != pg, base[3].rows(), len(want), pg.cols == nil)
	}
	ng := base[3]
	mems = append(mems, ng.mem...)
	ng.free()
	for i, a := range mems {
		if a.Mapped() || a.S != nil {
			t.Fatalf("seed %d: array %d of the freed groups still mapped", seed, i)
		}
	}
}
