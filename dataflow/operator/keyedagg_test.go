package operator_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var ktSpec = operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"}

func ktNew() (operator.Stateful, error) { return operator.NewKeyedAgg(tsSrcSchema, ktSpec) }

func ktOpen(t *testing.T, mem memory.Allocator, r keygroup.Range) operator.Stateful {
	t.Helper()
	op, err := ktNew()
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Open(operator.Context{Alloc: mem, Parallelism: 1, KeyGroups: r}); err != nil {
		t.Fatal(err)
	}
	return op
}

// ktRows builds source rows (id, key, value, ts) from key/value pairs.
func ktRows(pairs ...int64) [][]int64 {
	rows := make([][]int64, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		rows = append(rows, []int64{int64(i), pairs[i], pairs[i+1], 0})
	}
	return rows
}

func ktProcess(t *testing.T, op operator.Operator, mem memory.Allocator, rows [][]int64) {
	t.Helper()
	b := optest.Batch(mem, tsSrcSchema, rows)
	defer b.Release()
	if err := op.Process(0, b, nil); err != nil {
		t.Fatal(err)
	}
}

func ktFlush(t *testing.T, op operator.Operator) [][]int64 {
	t.Helper()
	out := &optest.Collector{Schema: op.OutputSchema()}
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	return out.Rows
}

func ktSnapshotRows(t *testing.T, op operator.Stateful) map[int][][]int64 {
	t.Helper()
	parts, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer operator.ReleaseStates(parts)
	got := map[int][][]int64{}
	for _, p := range parts {
		if !p.Batch.Schema().Equal(op.StateSchema()) {
			t.Fatalf("state schema %s, want %s", p.Batch.Schema(), op.StateSchema())
		}
		got[p.KeyGroup] = optest.Sorted(optest.Rows(p.Batch))
	}
	return got
}

func TestKeyedAggGolden(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	if got := op.OutputSchema().Field(3).Name; got != sink.VersionColumn {
		t.Fatalf("version column %q, want %q", got, sink.VersionColumn)
	}

	ktProcess(t, op, mem, ktRows(7, 10, 3, 1, 7, 5, -2, 4))
	ktProcess(t, op, mem, ktRows(3, 2, 0, -6))
	// Order of first change: 7, 3, -2, 0.
	want := [][]int64{{7, 2, 15, 2}, {3, 2, 3, 2}, {-2, 1, 4, 1}, {0, 1, -6, 1}}
	if got := ktFlush(t, op); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("first flush %v, want %v", got, want)
	}
	if got := ktFlush(t, op); len(got) != 0 {
		t.Fatalf("flush with no changes emitted %v", got)
	}
	// Only changed keys, with counts after the change and _version = count.
	ktProcess(t, op, mem, ktRows(-2, 1, 3, 0, -2, 1))
	want = [][]int64{{-2, 3, 6, 3}, {3, 3, 3, 3}}
	if got := ktFlush(t, op); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("second flush %v, want %v", got, want)
	}

	state := ktSnapshotRows(t, op)
	all := map[int64][]int64{}
	for kg, rows := range state {
		for _, r := range rows {
			if keygroup.Of(r[0]) != kg {
				t.Fatalf("key %d filed under key group %d", r[0], kg)
			}
			all[r[0]] = r
		}
	}
	wantState := map[int64][]int64{7: {7, 2, 15}, 3: {3, 3, 3}, -2: {-2, 3, 6}, 0: {0, 1, -6}}
	if len(all) != len(wantState) {
		t.Fatalf("state %v, want %v", all, wantState)
	}
	for k, w := range wantState {
		if !slices.Equal(all[k], w) {
			t.Fatalf("state of key %d: %v, want %v", k, all[k], w)
		}
	}
}

func TestKeyedAggSnapshotNeedsFlush(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	ktProcess(t, op, mem, ktRows(1, 1))
	if parts, err := op.Snapshot(); err == nil || !strings.Contains(err.Error(), "Flush") {
		operator.ReleaseStates(parts)
		t.Fatalf("snapshot with pending changes: err = %v, want one asking for Flush", err)
	}
	ktFlush(t, op)
	if got := ktSnapshotRows(t, op); len(got) != 1 {
		t.Fatalf("snapshot after flush: %v", got)
	}
}

func TestKeyedAggEmptyState(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	ktProcess(t, op, mem, nil)
	if got := ktFlush(t, op); len(got) != 0 {
		t.Fatalf("flush after empty batch: %v", got)
	}
	if got := ktSnapshotRows(t, op); len(got) != 0 {
		t.Fatalf("snapshot of empty state: %v", got)
	}
}

func TestKeyedAggColumnErrors(t *testing.T) {
	mixed := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	for _, tc := range []struct {
		schema *arrow.Schema
		spec   operator.KeyedAggSpec
		want   []string
	}{
		{tsSrcSchema, operator.KeyedAggSpec{KeyColumn: "k", SumColumn: "value"}, []string{`"k"`, "id int64"}},
		{tsSrcSchema, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "v"}, []string{`"v"`, "id int64"}},
		{mixed, operator.KeyedAggSpec{KeyColumn: "key", SumColumn: "value"}, []string{`"value"`, "int32", "value int32"}},
	} {
		_, err := operator.NewKeyedAgg(tc.schema, tc.spec)
		wantMentions(t, fmt.Sprintf("%+v", tc.spec), err, tc.want)
	}
}

// ktKeyInGroup returns some key whose key group is kg.
func ktKeyInGroup(kg int) int64 {
	for k := int64(0); ; k++ {
		if keygroup.Of(k) == kg {
			return k
		}
	}
}

func TestKeyedAggRejectsKeysOfOtherGroups(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.RangeFor(0, 2))
	defer op.Close()
	b := optest.Batch(mem, tsSrcSchema, ktRows(ktKeyInGroup(100), 1))
	defer b.Release()
	err := op.Process(0, b, nil)
	if err == nil || !strings.Contains(err.Error(), "key group 100") {
		t.Fatalf("key of a foreign key group: err = %v", err)
	}
}

func TestKeyedAggRestoreRejectsBadState(t *testing.T) {
	mem := checkedMem(t)
	k5 := ktKeyInGroup(5)
	for _, tc := range []struct {
		name string
		kg   int
		rows [][]int64
		want string
	}{
		{"wrong key group", 6, [][]int64{{k5, 1, 1}}, "belongs to key group 5"},
		{"not owned", 100, [][]int64{{ktKeyInGroup(100), 1, 1}}, "not owned"},
		{"duplicate key", 5, [][]int64{{k5, 1, 1}, {k5, 2, 2}}, fmt.Sprintf("key %d appears twice", k5)},
		{"zero count", 5, [][]int64{{k5, 0, 1}}, "count 0"},
	} {
		op := ktOpen(t, mem, keygroup.RangeFor(0, 2))
		b := optest.Batch(mem, op.StateSchema(), tc.rows)
		err := op.Restore([]operator.KeyGroupState{{KeyGroup: tc.kg, Batch: b}})
		b.Release()
		op.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	b := optest.Batch(mem, tsSrcSchema, ktRows(k5, 1))
	defer b.Release()
	if err := op.Restore([]operator.KeyGroupState{{KeyGroup: 5, Batch: b}}); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("restore of a batch with another schema: err = %v", err)
	}
}

func TestKeyedAggNullSums(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	bld := array.NewRecordBuilder(mem, tsSrcSchema)
	defer bld.Release()
	for c := 0; c < 4; c++ {
		var valid []bool
		if c == 2 {
			valid = []bool{true, false, true}
		}
		vals := []int64{1, 2, 3}
		if c == 1 {
			vals = []int64{9, 9, 8}
		}
		bld.Field(c).(*array.Int64Builder).AppendValues(vals, valid)
	}
	b := bld.NewRecordBatch()
	defer b.Release()
	if err := op.Process(0, b, nil); err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{9, 2, 1, 2}, {8, 1, 3, 1}}
	if got := ktFlush(t, op); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestKeyedAggLargeFlush covers tables growing while keys are pending and a
// Flush split over several batches.
func TestKeyedAggLargeFlush(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	const n = 150_000
	rows := make([][]int64, 0, n)
	for k := range int64(n) {
		rows = append(rows, []int64{k, k, 2 * k, 0})
	}
	ktProcess(t, op, mem, rows[:n/3])
	ktProcess(t, op, mem, rows)
	out := &optest.Collector{Schema: op.OutputSchema()}
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	if out.Emits < 2 || len(out.Rows) != n {
		t.Fatalf("%d rows in %d batches, want %d in several", len(out.Rows), out.Emits, n)
	}
	for i, r := range out.Rows {
		k := int64(i)
		c := int64(1)
		if i < n/3 {
			c = 2
		}
		if !slices.Equal(r, []int64{k, c, 2 * k * c, c}) {
			t.Fatalf("row %d: %v", i, r)
		}
	}
}

// ktModel is the obvious reference for the keyed aggregation.
type ktModel map[int64][2]int64

func (m ktModel) rows() [][]int64 {
	var out [][]int64
	for k, v := range m {
		out = append(out, []int64{k, v[0], v[1]})
	}
	return optest.Sorted(out)
}

// ktRandomSteps builds a random input: batches of skewed keys, some empty,
// with watermarks in between (which the aggregation ignores).
func ktRandomSteps(r *rand.Rand, m ktModel) []optest.Step {
	nSteps := 1 + r.IntN(12)
	keys := 1 + r.IntN(300)
	var steps []optest.Step
	id := int64(0)
	for range nSteps {
		if r.IntN(5) == 0 {
			steps = append(steps, optest.WM(r.Int64N(1000)))
			continue
		}
		var rows [][]int64
		for range r.IntN(400) {
			k := int64(r.IntN(keys)) - int64(keys/3) // negative keys too
			if r.IntN(4) == 0 {
				k = int64(r.IntN(1 + keys/10)) // hot keys
			}
			v := r.Int64N(2000) - 1000
			rows = append(rows, []int64{id, k, v, id})
			id++
			e := m[k]
			m[k] = [2]int64{e[0] + 1, e[1] + v}
		}
		steps = append(steps, optest.In(0, rows...))
	}
	return steps
}

func TestKeyedAggSnapshotRestoreProperty(t *testing.T) {
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 100 {
		caseSeed := r.Uint64()
		cr := rand.New(rand.NewPCG(caseSeed, 1))
		m := ktModel{}
		steps := ktRandomSteps(cr, m)
		c := optest.Case{
			New:        ktNew,
			Inputs:     []*arrow.Schema{tsSrcSchema},
			KeyColumns: []string{"key"},
			Steps:      steps,
			Cut:        cr.IntN(len(steps) + 1),
			Restore:    []int{1, 2, 4, 3}[i%4],
			Alloc:      mem,
			Seed:       seed, // REWIND_TEST_SEED replays the whole test
		}
		res := optest.CheckSnapshot(t, c)
		if want := m.rows(); !slices.EqualFunc(res.Final, want, slices.Equal) {
			t.Fatalf("seed %d (case seed %d): final state differs from the model\n got %v\nwant %v",
				seed, caseSeed, res.Final, want)
		}
		ktCheckVersions(t, fmt.Sprintf("seed %d, case seed %d", seed, caseSeed), res.After)
	}
}

// ktCheckVersions checks every emitted row has _version == count and that a
// key's versions strictly increase.
func ktCheckVersions(t *testing.T, where string, rows [][]int64) {
	t.Helper()
	for i, r := range rows {
		if r[3] != r[1] {
			t.Fatalf("%s: row %v: _version differs from count", where, r)
		}
		if i > 0 && rows[i-1][0] == r[0] && rows[i-1][3] >= r[3] {
			t.Fatalf("%s: key %d emitted version %d twice", where, r[0], r[3])
		}
	}
}

func TestKeyedAggRejectsBatchOfAnotherSchema(t *testing.T) {
	mem := checkedMem(t)
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	s := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "key", Type: arrow.BinaryTypes.String}}, nil)
	bld := array.NewRecordBuilder(mem, s)
	defer bld.Release()
	bld.Field(0).(*array.Int64Builder).Append(1)
	bld.Field(1).(*array.StringBuilder).Append("x")
	b := bld.NewRecordBatch()
	defer b.Release()
	if err := op.Process(0, b, nil); err == nil {
		t.Fatal("batch with a string key column accepted")
	}
}

func TestKeyedAggFlushOrderAcrossPatterns(t *testing.T) {
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	state := map[int64][2]int64{}
	for step := range 40 {
		// A random number of distinct keys; every 4th step all rows are
		// new keys, and every 8th (from step 1) all rows repeat one key.
		n := 1 + r.IntN(3000)
		distinct := 1 + r.IntN(n)
		if step%4 == 0 {
			distinct = n
		}
		base := int64(r.IntN(5000))
		var rows [][]int64
		var order []int64
		seen := map[int64]bool{}
		for i := range n {
			k := base + int64(r.IntN(distinct))
			if step%8 == 1 {
				k = base
			}
			if step%4 == 0 {
				k = base + int64(i)
			}
			v := r.Int64N(100)
			rows = append(rows, []int64{int64(i), k, v, 0})
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
			e := state[k]
			state[k] = [2]int64{e[0] + 1, e[1] + v}
		}
		ktProcess(t, op, mem, rows)
		got := ktFlush(t, op)
		if len(got) != len(order) {
			t.Fatalf("seed %d step %d: %d rows emitted, want %d", seed, step, len(got), len(order))
		}
		for i, k := range order {
			e := state[k]
			if want := []int64{k, e[0], e[1], e[0]}; !slices.Equal(got[i], want) {
				t.Fatalf("seed %d step %d row %d: %v, want %v", seed, step, i, got[i], want)
			}
		}
	}
}
