package operator_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

func winSpec(size int64) operator.WindowSpec {
	return operator.WindowSpec{KeyColumn: "key", TimeColumn: "ts", SumColumn: "value", Size: size}
}

func newWinOp(t testing.TB, size int64) operator.Stateful {
	t.Helper()
	op, err := operator.NewWindowAgg(winInSchema, winSpec(size))
	if err != nil {
		t.Fatalf("NewWindowAgg: %v", err)
	}
	return op
}

func TestWindowConstructorErrors(t *testing.T) {
	strSchema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for _, tc := range []struct {
		name   string
		schema *arrow.Schema
		spec   operator.WindowSpec
		want   []string
	}{
		{"missing", winInSchema, operator.WindowSpec{KeyColumn: "k", TimeColumn: "ts", SumColumn: "value", Size: 10},
			[]string{`"k"`, "not found", "(id int64, key int64, value int64, ts int64)"}},
		{"not int64", strSchema, winSpec(10), []string{`"ts"`, "utf8", "want int64", "(key int64, ts utf8, value int64)"}},
		{"size", winInSchema, winSpec(0), []string{"size must be positive"}},
	} {
		_, err := operator.NewWindowAgg(tc.schema, tc.spec)
		wantMentions(t, tc.name, err, tc.want)
	}
}

func TestWindowGolden(t *testing.T) {
	mem := checkedMem(t)
	op := newWinOp(t, 10)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}
	process := func(rows ...winRow) {
		t.Helper()
		b := winBatch(t, mem, winInSchema, rows)
		defer b.Release()
		if err := op.Process(0, b, out); err != nil {
			t.Fatal(err)
		}
	}
	advance := func(wm int64, want ...[]int64) {
		t.Helper()
		if err := op.AdvanceWatermark(wm, out); err != nil {
			t.Fatal(err)
		}
		got := out.take()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("watermark %d: emitted %v, want %v (in this order)", wm, got, want)
		}
	}

	// id, key, value, ts
	process(
		winRow{1, 1, 5, 1},   // key 1, [0,10)
		winRow{2, 1, 3, 9},   // key 1, [0,10)
		winRow{3, 2, 7, 12},  // key 2, [10,20)
		winRow{4, 1, 1, -3},  // key 1, [-10,0): floor, not truncation
		winRow{5, 2, 4, -10}, // key 2, [-10,0)
		winRow{6, 2, -2, 0},  // key 2, [0,10); negative values are summed
		winRow{7, 1, 2, -11}, // key 1, [-20,-10)
		winRow{8, 3, 1, 15},  // key 3, [10,20)
		winRow{9, 1, 1, 25},  // key 1, [20,30)
		winRow{10, 0, 1, 11}, // key 0, [10,20)
	)
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	if len(out.rows) != 0 {
		t.Fatalf("Process/Flush emitted %v; windows must wait for the watermark", out.rows)
	}
	advance(-11)                           // end -10 > -11: nothing
	advance(-10, []int64{1, -20, 1, 2, 0}) // end == watermark fires
	advance(0, []int64{1, -10, 1, 1, 0}, []int64{2, -10, 1, 4, 0})
	process(
		winRow{11, 1, 10, -5},  // [-10,0) fired at 0: late
		winRow{12, 2, 6, 3},    // on time
		winRow{13, 1, 100, -1}, // late
	)
	if got := op.(operator.LateCounter).LateRows(); got != 2 {
		t.Fatalf("late rows %d, want 2", got)
	}
	advance(5)
	process(winRow{14, 1, 4, 2}) // below the watermark, but [0,10) is open: counted
	advance(3)                   // behind the watermark: ignored
	advance(10, []int64{1, 0, 3, 12, 0}, []int64{2, 0, 2, 4, 0})
	advance(9) // ignored, must not refire anything
	// End, then key, across key groups.
	advance(operator.EndOfTime,
		[]int64{0, 10, 1, 1, 0}, []int64{2, 10, 1, 7, 0}, []int64{3, 10, 1, 1, 0},
		[]int64{1, 20, 1, 1, 0})
	if got := op.(operator.LateCounter).LateRows(); got != 2 {
		t.Fatalf("late rows %d, want 2", got)
	}
	process(winRow{15, 5, 1, math.MaxInt64 - 1}) // after the end of time everything is late
	if got := op.(operator.LateCounter).LateRows(); got != 3 {
		t.Fatalf("late rows %d after EndOfTime, want 3", got)
	}
}

// Timestamps at the int64 limits must not wrap: the first window is cut at
// MinInt64 and the last one ends (saturated) at EndOfTime.
func TestWindowExtremeTimestamps(t *testing.T) {
	mem := checkedMem(t)
	op := newWinOp(t, 1000)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}
	b := winBatch(t, mem, winInSchema, [][]int64{
		{1, 7, 1, math.MinInt64},
		{2, 7, 2, math.MinInt64 + 1},
		{3, 7, 4, -9223372036854775000}, // exactly a window start
		{4, 7, 8, math.MaxInt64},
	})
	defer b.Release()
	if err := op.Process(0, b, out); err != nil {
		t.Fatal(err)
	}
	// The cut first window ends where the first aligned one starts.
	if err := op.AdvanceWatermark(-9223372036854775000, out); err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{7, math.MinInt64, 2, 3, 0}}
	if got := out.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
	if err := op.AdvanceWatermark(math.MaxInt64-1, out); err != nil {
		t.Fatal(err)
	}
	want = [][]int64{{7, -9223372036854775000, 1, 4, 0}}
	if got := out.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}
	if err := op.AdvanceWatermark(operator.EndOfTime, out); err != nil {
		t.Fatal(err)
	}
	want = [][]int64{{7, math.MaxInt64 - math.MaxInt64%1000, 1, 8, 0}}
	if got := out.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("at EndOfTime emitted %v, want %v", got, want)
	}
}

// winOracle is the relational answer: group every row by key and window.
func winOracle(rows [][]int64, size int64) [][]int64 {
	type slot struct{ key, start int64 }
	acc := map[slot][2]int64{}
	for _, r := range rows {
		s := slot{r[winIdxKey], winFloorDiv(r[winIdxTS], size) * size}
		a := acc[s]
		a[0]++
		a[1] += r[winIdxValue]
		acc[s] = a
	}
	out := make([][]int64, 0, len(acc))
	for s, a := range acc {
		out = append(out, []int64{s.key, s.start, a[0], a[1], 0})
	}
	return out
}

func TestWindowOrderIndependence(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		size := 1 + rng.Int64N(50)
		cfg := winGenConfig{ports: 1, partsPerPort: 1 + rng.IntN(4), rowsPerPart: 50 + rng.IntN(200),
			keys: 1 + rng.Int64N(20), disorder: rng.Int64N(40), maxStep: 1 + rng.Int64N(10),
			tsStart: -rng.Int64N(500), maxChunk: 1 + rng.IntN(30)}
		events, rows := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) { return operator.NewWindowAgg(winInSchema, winSpec(size)) }
		winOrderProperty(t, fmt.Sprintf("seed %d (size %d, %+v)", seed, size, cfg), mem, winInSchema,
			newOp, events, winOracle(rows[0], size))
	}
}

func TestWindowSnapshotProperty(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 25; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		size := 1 + rng.Int64N(30)
		cfg := winGenConfig{ports: 1, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 30 + rng.IntN(150),
			keys: 1 + rng.Int64N(30), disorder: rng.Int64N(20), maxStep: 1 + rng.Int64N(8),
			tsStart: -rng.Int64N(300), maxChunk: 1 + rng.IntN(20),
			// Late rows too: a restored instance must agree on what is late.
			lateProb: 0.3, lateSpan: 3 * size}
		events, _ := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) { return operator.NewWindowAgg(winInSchema, winSpec(size)) }
		winSnapshotProperty(t, seed, mem, winInSchema, newOp, events)
	}
}

func TestWindowRescaleProperty(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 25; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		size := 1 + rng.Int64N(30)
		cfg := winGenConfig{ports: 1, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 30 + rng.IntN(100),
			keys: 1 + rng.Int64N(40), disorder: rng.Int64N(20), maxStep: 1 + rng.Int64N(8),
			tsStart: -rng.Int64N(300), maxChunk: 1 + rng.IntN(20)}
		events, _ := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) { return operator.NewWindowAgg(winInSchema, winSpec(size)) }
		winRescaleProperty(t, seed, mem, []*arrow.Schema{winInSchema}, newOp, events)
	}
}

// Snapshot holds exactly the key groups with open windows, each row with the
// group's watermark, and a restored instance agrees on what is late, both in
// restored groups and in groups that had no part.
func TestWindowSnapshotGroupsAndWatermark(t *testing.T) {
	mem := checkedMem(t)
	op := newWinOp(t, 10)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}

	parts, err := op.Snapshot()
	if err != nil || len(parts) != 0 {
		t.Fatalf("fresh snapshot: %d parts, %v; want none", len(parts), err)
	}
	keys := []int64{3, 17, 99, 1 << 40}
	var rows [][]int64
	wantGroups := map[int]bool{}
	for i, k := range keys {
		rows = append(rows, []int64{int64(i), k, 1, 5}, []int64{int64(i + 10), k, 2, 25})
		wantGroups[keygroup.Of(k)] = true
	}
	b := winBatch(t, mem, winInSchema, rows)
	defer b.Release()
	if err := op.Process(0, b, out); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Snapshot(); err == nil || !strings.Contains(err.Error(), "Flush") {
		t.Fatalf("snapshot without flush: %v, want an error about Flush", err)
	}
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	if err := op.AdvanceWatermark(10, out); err != nil {
		t.Fatal(err)
	}
	if got := len(out.take()); got != len(keys) {
		t.Fatalf("watermark 10 fired %d windows, want %d", got, len(keys))
	}
	parts, err = op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	state := winStateRows(t, parts, op.StateSchema())
	if len(parts) != len(wantGroups) {
		t.Fatalf("snapshot has %d parts, want %d (one per non-empty key group)", len(parts), len(wantGroups))
	}
	for kg, rs := range state {
		if !wantGroups[kg] {
			t.Fatalf("snapshot has key group %d, which holds no window", kg)
		}
		for _, r := range rs {
			if keygroup.Of(r[0]) != kg || r[1] != 20 || r[2] != 1 || r[3] != 2 || r[4] != 10 {
				t.Fatalf("key group %d state row %v: want [key-of-group 20 1 2 10]", kg, r)
			}
		}
	}
	parts = winRoundTrip(t, mem, parts)
	defer operator.ReleaseStates(parts)

	re := newWinOp(t, 10)
	defer re.Close()
	winOpen(t, re, mem, keygroup.All)
	if err := re.Restore(parts); err != nil {
		t.Fatal(err)
	}
	// Key 3's [0,10) fired before the cut; key 5 had no part (no open
	// window) but the same watermark applies to its group.
	if keygroup.Of(5) == keygroup.Of(3) {
		t.Fatal("test needs keys 3 and 5 in different key groups")
	}
	late := winBatch(t, mem, winInSchema, [][]int64{{50, 3, 100, 9}, {51, 5, 100, 2}, {52, 3, 7, 21}})
	defer late.Release()
	if err := re.Process(0, late, out); err != nil {
		t.Fatal(err)
	}
	if err := re.AdvanceWatermark(operator.EndOfTime, out); err != nil {
		t.Fatal(err)
	}
	if got := re.(operator.LateCounter).LateRows(); got != 2 {
		t.Fatalf("restored instance: late rows %d, want 2", got)
	}
	want := [][]int64{{3, 20, 2, 9, 0}}
	for _, k := range keys[1:] {
		want = append(want, []int64{k, 20, 1, 2, 0})
	}
	winSameMultiset(t, "after restore", out.take(), want)
}

func TestWindowRestoreRejects(t *testing.T) {
	mem := checkedMem(t)
	state := winPartMaker(t, mem, newWinOp(t, 10))
	k := int64(3)
	kg := keygroup.Of(k)
	other := (kg + 1) % keygroup.Count
	half := keygroup.Range{Start: kg, End: kg + 1}
	winExpectRestoreRejects(t, mem, func() operator.Stateful { return newWinOp(t, 10) }, []winRestoreCase{
		{"outside range", half, []operator.KeyGroupState{state(other, []int64{k, 0, 1, 1, 0})}, "outside"},
		{"wrong group", keygroup.All, []operator.KeyGroupState{state(other, []int64{k, 0, 1, 1, 0})}, "belongs to key group"},
		{"twice", keygroup.All, []operator.KeyGroupState{state(kg, []int64{k, 0, 1, 1, 0}), state(kg, []int64{k, 10, 1, 1, 0})}, "twice"},
		{"duplicate window", keygroup.All, []operator.KeyGroupState{state(kg, []int64{k, 0, 1, 1, 0}, []int64{k, 0, 2, 1, 0})}, "appears twice"},
		{"fired", keygroup.All, []operator.KeyGroupState{state(kg, []int64{k, 0, 1, 1, 10})}, "should have fired"},
		{"not a start", keygroup.All, []operator.KeyGroupState{state(kg, []int64{k, 5, 1, 1, 0})}, "not a window start"},
		{"watermarks differ", keygroup.All, []operator.KeyGroupState{state(kg, []int64{k, 0, 1, 1, 0}, []int64{k, 10, 1, 1, 1})}, "different watermarks"},
		{"schema", keygroup.All, []operator.KeyGroupState{{KeyGroup: kg, Batch: winBatch(t, mem, winInSchema, [][]int64{{1, k, 1, 1}})}}, "schema"},
	})

	// Restore after input is refused: the state would silently merge.
	op := newWinOp(t, 10)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	if err := op.AdvanceWatermark(0, &winSink{t: t}); err != nil {
		t.Fatal(err)
	}
	if err := op.Restore(nil); err == nil {
		t.Fatalf("restore after a watermark: no error")
	}
}

func TestWindowProcessRejects(t *testing.T) {
	mem := checkedMem(t)
	op := newWinOp(t, 10)
	defer op.Close()
	k := int64(3)
	kg := keygroup.Of(k)
	winOpen(t, op, mem, keygroup.Range{Start: (kg + 1) % keygroup.Count, End: (kg+1)%keygroup.Count + 1})
	b := winBatch(t, mem, winInSchema, [][]int64{{1, k, 1, 1}})
	defer b.Release()
	out := &winSink{t: t, schema: op.OutputSchema()}
	if err := op.Process(0, b, out); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("row of a foreign key group: %v, want an error", err)
	}
	if err := op.Process(1, b, out); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("port 1: %v, want an error", err)
	}
	other := winBatch(t, mem, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil), [][]int64{{1}})
	defer other.Release()
	if err := op.Process(0, other, out); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("batch of another schema: %v, want an error", err)
	}
}
