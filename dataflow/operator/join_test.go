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

func joinSpec(within int64) operator.JoinSpec {
	return operator.JoinSpec{KeyColumn: "key", TimeColumn: "ts", IDColumn: "id", ValueColumn: "value", Within: within}
}

func newJoinOp(t testing.TB, within int64) operator.Stateful {
	t.Helper()
	op, err := operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(within))
	if err != nil {
		t.Fatalf("NewIntervalJoin: %v", err)
	}
	return op
}

func TestJoinConstructorErrors(t *testing.T) {
	noID := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	floatTS := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	for _, tc := range []struct {
		name        string
		left, right *arrow.Schema
		within      int64
		want        []string
	}{
		{"left missing id", noID, winInSchema, 5, []string{"left", `"id"`, "not found", "(key int64, value int64, ts int64)"}},
		{"right ts not int64", winInSchema, floatTS, 5, []string{"right", `"ts"`, "float64", "want int64", "ts float64)"}},
		{"negative within", winInSchema, winInSchema, -1, []string{"must not be negative"}},
	} {
		_, err := operator.NewIntervalJoin(tc.left, tc.right, joinSpec(tc.within))
		wantMentions(t, tc.name, err, tc.want)
	}
}

func TestJoinGolden(t *testing.T) {
	mem := checkedMem(t)
	op := newJoinOp(t, 5)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}
	late := op.(operator.LateCounter)
	process := func(port int, rows [][]int64, want ...[]int64) {
		t.Helper()
		b := winBatch(t, mem, winInSchema, rows)
		defer b.Release()
		if err := op.Process(port, b, out); err != nil {
			t.Fatal(err)
		}
		if got := out.take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("port %d rows %v: emitted %v, want %v (in this order)", port, rows, got, want)
		}
	}
	advance := func(wm int64) {
		t.Helper()
		if err := op.AdvanceWatermark(wm, out); err != nil {
			t.Fatal(err)
		}
		if len(out.rows) != 0 {
			t.Fatalf("watermark %d emitted %v; the join emits only from Process", wm, out.rows)
		}
	}

	// Rows are id, key, value, ts; output is key, order_id, payment_id, amount, paid, _version.
	process(operator.JoinLeft, [][]int64{{101, 1, 50, 10}, {102, 1, 60, 20}, {103, 2, 70, 10}})
	process(operator.JoinRight, [][]int64{
		{201, 1, 5, 15}, // |Δ| == 5 with both 101 and 102: two matches, buffered (ts) order
		{202, 1, 6, 26}, // |Δ| == 6 with 102: no match
		{203, 2, 7, 4},  // |Δ| == 6 with 103: no match
		{204, 2, -8, 5}, // |Δ| == 5 with 103; a negative value is joined too
	},
		[]int64{1, 101, 201, 50, 5, 0}, []int64{1, 102, 201, 60, 5, 0}, []int64{2, 103, 204, 70, -8, 0})
	process(operator.JoinLeft, [][]int64{{104, 1, 80, 21}}, []int64{1, 104, 202, 80, 6, 0})

	advance(16) // prunes ts < 11: orders 101, 103 and payments 203, 204
	advance(12) // behind: ignored
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	parts, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var stateRows [][]int64
	for kg, rows := range winStateRows(t, parts, op.StateSchema()) {
		for _, r := range rows {
			if keygroup.Of(r[1]) != kg {
				t.Fatalf("state row %v in key group %d", r, kg)
			}
		}
		stateRows = append(stateRows, rows...)
	}
	operator.ReleaseStates(parts)
	// side, key, id, value, ts, watermark
	winSameMultiset(t, "state after watermark 16", stateRows, [][]int64{
		{0, 1, 102, 60, 20, 16}, {0, 1, 104, 80, 21, 16}, {1, 1, 201, 5, 15, 16}, {1, 1, 202, 6, 26, 16}})

	process(operator.JoinRight, [][]int64{{205, 1, 9, 16}}, // on time; 101 (Δ 6) is gone anyway
		[]int64{1, 102, 205, 60, 9, 0}, []int64{1, 104, 205, 80, 9, 0})
	if late.LateRows() != 0 {
		t.Fatalf("late rows %d, want 0", late.LateRows())
	}
	// Late (ts < 16): 103 and 204 were pruned, so nothing matches; ts 9 is
	// not even buffered (9+5 < 16).
	process(operator.JoinLeft, [][]int64{{105, 2, 1, 9}})
	// Late but still matchable by on-time rows (12+5 >= 16): buffered.
	process(operator.JoinRight, [][]int64{{206, 2, 2, 12}})
	if late.LateRows() != 2 {
		t.Fatalf("late rows %d, want 2", late.LateRows())
	}
	process(operator.JoinLeft, [][]int64{{106, 2, 3, 17}}, []int64{2, 106, 206, 3, 2, 0})
	advance(operator.EndOfTime)
	process(operator.JoinRight, [][]int64{{207, 1, 1, 21}}) // after the end everything is late and gone
	if late.LateRows() != 3 {
		t.Fatalf("late rows %d, want 3", late.LateRows())
	}
}

// Times near the int64 limits must not wrap around in the probe and prune
// bounds.
func TestJoinExtremeTimestamps(t *testing.T) {
	mem := checkedMem(t)
	op := newJoinOp(t, 10)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}
	for _, step := range []struct {
		port int
		row  []int64
	}{
		{0, []int64{1, 4, 1, math.MinInt64}}, {1, []int64{2, 4, 2, math.MinInt64 + 10}},
		{0, []int64{3, 4, 3, math.MaxInt64}}, {1, []int64{4, 4, 4, math.MaxInt64 - 10}},
		{1, []int64{5, 4, 5, 0}},
	} {
		b := winBatch(t, mem, winInSchema, [][]int64{step.row})
		err := op.Process(step.port, b, out)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	winSameMultiset(t, "extremes", out.take(), [][]int64{{4, 1, 2, 1, 2, 0}, {4, 3, 4, 3, 4, 0}})
	if err := op.AdvanceWatermark(operator.EndOfTime, out); err != nil {
		t.Fatal(err)
	}
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	parts, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	rows := winStateRows(t, parts, op.StateSchema())[keygroup.Of(4)]
	operator.ReleaseStates(parts)
	// Only rows within Within of the end of time survive EndOfTime.
	winSameMultiset(t, "state at EndOfTime", rows, [][]int64{
		{0, 4, 3, 3, math.MaxInt64, operator.EndOfTime}, {1, 4, 4, 4, math.MaxInt64 - 10, operator.EndOfTime}})
}

// joinOracle is the relational join: every pair with the same key and
// |Δts| <= within.
func joinOracle(left, right [][]int64, within int64) [][]int64 {
	byKey := map[int64][][]int64{}
	for _, r := range right {
		byKey[r[winIdxKey]] = append(byKey[r[winIdxKey]], r)
	}
	var out [][]int64
	for _, l := range left {
		for _, r := range byKey[l[winIdxKey]] {
			if d := l[winIdxTS] - r[winIdxTS]; d >= -within && d <= within {
				out = append(out, []int64{l[winIdxKey], l[winIdxID], r[winIdxID], l[winIdxValue], r[winIdxValue], 0})
			}
		}
	}
	return out
}

func TestJoinOrderIndependence(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 4))
		within := rng.Int64N(30)
		cfg := winGenConfig{ports: 2, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 30 + rng.IntN(150),
			keys: 1 + rng.Int64N(15), disorder: rng.Int64N(40), maxStep: 1 + rng.Int64N(10),
			tsStart: -rng.Int64N(500), maxChunk: 1 + rng.IntN(30)}
		events, rows := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) {
			return operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(within))
		}
		winOrderProperty(t, fmt.Sprintf("seed %d (within %d, %+v)", seed, within, cfg), mem, winInSchema,
			newOp, events, joinOracle(rows[0], rows[1], within))
	}
}

// Pruning must actually bound the state: with watermarks following the
// input, what stays buffered is only rows within reach of the watermark.
func TestJoinPruningBoundsState(t *testing.T) {
	mem := checkedMem(t)
	const within, disorder = 20, 5
	rng := rand.New(rand.NewPCG(5, 5))
	cfg := winGenConfig{ports: 2, partsPerPort: 2, rowsPerPart: 500, keys: 7,
		disorder: disorder, maxStep: 3, tsStart: 0, maxChunk: 10}
	events, _ := winGenerate(rng, cfg)
	h := newWinHarness(t, mem, winInSchema, func() (operator.Stateful, error) {
		return operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(within))
	})
	h.start(nil, keygroup.All)
	wm := operator.NoWatermark
	for _, ev := range events {
		h.apply(ev)
		if ev.kind == winEvWatermark {
			wm = max(wm, ev.wm)
		}
	}
	parts := h.snapshot()
	defer operator.ReleaseStates(parts)
	n := 0
	for _, rows := range winStateRows(t, parts, h.insts[0].op.StateSchema()) {
		for _, r := range rows {
			n++
			if r[4]+within < wm || r[5] != wm {
				t.Fatalf("state row %v (side key id value ts watermark): should have been pruned at watermark %d", r, wm)
			}
		}
	}
	if n == 0 || n >= 2000/4 {
		t.Fatalf("%d rows buffered of 2000; want some, and far fewer than the input", n)
	}
	h.closeAll()
}

func TestJoinSnapshotProperty(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 6))
		within := rng.Int64N(25)
		cfg := winGenConfig{ports: 2, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 30 + rng.IntN(120),
			keys: 1 + rng.Int64N(10), disorder: rng.Int64N(20), maxStep: 1 + rng.Int64N(8),
			tsStart: -rng.Int64N(300), maxChunk: 1 + rng.IntN(20),
			// Late rows too: lateness and buffering depend on the restored watermark.
			lateProb: 0.3, lateSpan: 2*within + 5}
		events, _ := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) {
			return operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(within))
		}
		winSnapshotProperty(t, seed, mem, winInSchema, newOp, events)
	}
}

func TestJoinRescaleProperty(t *testing.T) {
	mem := checkedMem(t)
	for seed := uint64(1); seed <= 25; seed++ {
		rng := rand.New(rand.NewPCG(seed, 8))
		within := rng.Int64N(25)
		cfg := winGenConfig{ports: 2, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 30 + rng.IntN(100),
			keys: 1 + rng.Int64N(20), disorder: rng.Int64N(20), maxStep: 1 + rng.Int64N(8),
			tsStart: -rng.Int64N(300), maxChunk: 1 + rng.IntN(20)}
		events, _ := winGenerate(rng, cfg)
		newOp := func() (operator.Stateful, error) {
			return operator.NewIntervalJoin(winInSchema, winInSchema, joinSpec(within))
		}
		winRescaleProperty(t, seed, mem, []*arrow.Schema{winInSchema, winInSchema}, newOp, events)
	}
}

func TestJoinRestoreRejects(t *testing.T) {
	mem := checkedMem(t)
	state := winPartMaker(t, mem, newJoinOp(t, 5))
	k := int64(3)
	kg := keygroup.Of(k)
	other := (kg + 1) % keygroup.Count
	one := keygroup.Range{Start: kg, End: kg + 1}
	// side, key, id, value, ts, watermark
	winExpectRestoreRejects(t, mem, func() operator.Stateful { return newJoinOp(t, 5) }, []winRestoreCase{
		{"outside range", one, []operator.KeyGroupState{state(other, []int64{0, k, 1, 1, 10, 0})}, "outside"},
		{"wrong group", keygroup.All, []operator.KeyGroupState{state(other, []int64{0, k, 1, 1, 10, 0})}, "belongs to key group"},
		{"twice", keygroup.All, []operator.KeyGroupState{state(kg, []int64{0, k, 1, 1, 10, 0}), state(kg, []int64{1, k, 2, 1, 10, 0})}, "twice"},
		{"side", keygroup.All, []operator.KeyGroupState{state(kg, []int64{2, k, 1, 1, 10, 0})}, "side 2"},
		{"pruned", keygroup.All, []operator.KeyGroupState{state(kg, []int64{0, k, 1, 1, 4, 10})}, "should have been pruned"},
		{"order", keygroup.All, []operator.KeyGroupState{state(kg, []int64{0, k, 1, 1, 10, 0}, []int64{0, k, 2, 1, 9, 0})}, "ts order"},
		{"watermarks differ", keygroup.All, []operator.KeyGroupState{state(kg, []int64{0, k, 1, 1, 10, 0}, []int64{1, k, 2, 1, 10, 1})}, "different watermarks"},
		{"schema", keygroup.All, []operator.KeyGroupState{{KeyGroup: kg, Batch: winBatch(t, mem, winInSchema, [][]int64{{1, k, 1, 1}})}}, "schema"},
	})

	op := newJoinOp(t, 5)
	defer op.Close()
	winOpen(t, op, mem, keygroup.All)
	b := winBatch(t, mem, winInSchema, [][]int64{{1, k, 1, 1}})
	defer b.Release()
	out := &winSink{t: t, schema: op.OutputSchema()}
	if err := op.Process(0, b, out); err != nil {
		t.Fatal(err)
	}
	if err := op.Restore(nil); err == nil {
		t.Fatalf("restore after input: no error")
	}
	if _, err := op.Snapshot(); err == nil || !strings.Contains(err.Error(), "Flush") {
		t.Fatalf("snapshot without flush: %v, want an error about Flush", err)
	}
	if err := op.Process(2, b, out); err == nil || !strings.Contains(err.Error(), "port 2") {
		t.Fatalf("port 2: %v, want an error", err)
	}
}

// A restored instance agrees on what is late and keeps joining the restored
// rows.
func TestJoinRestoreKeepsWatermark(t *testing.T) {
	mem := checkedMem(t)
	op := newJoinOp(t, 5)
	winOpen(t, op, mem, keygroup.All)
	out := &winSink{t: t, schema: op.OutputSchema()}
	b := winBatch(t, mem, winInSchema, [][]int64{{1, 3, 10, 20}})
	if err := op.Process(0, b, out); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if err := op.AdvanceWatermark(22, out); err != nil {
		t.Fatal(err)
	}
	if err := op.Flush(out); err != nil {
		t.Fatal(err)
	}
	parts, err := op.Snapshot()
	op.Close()
	if err != nil {
		t.Fatal(err)
	}
	parts = winRoundTrip(t, mem, parts)
	if keygroup.Of(5) == keygroup.Of(3) {
		t.Fatal("test needs keys 3 and 5 in different key groups")
	}
	re := newJoinOp(t, 5)
	defer re.Close()
	winOpen(t, re, mem, keygroup.All)
	err = re.Restore(parts)
	operator.ReleaseStates(parts)
	if err != nil {
		t.Fatal(err)
	}
	// Key 3: ts 18 is late (< 22) but matches the restored order (Δ 2);
	// key 5 had no part, yet its group takes the restored watermark: ts 10
	// is late and, unmatchable by on-time rows, not buffered.
	b = winBatch(t, mem, winInSchema, [][]int64{{2, 3, 20, 18}, {3, 5, 30, 10}})
	defer b.Release()
	if err := re.Process(1, b, out); err != nil {
		t.Fatal(err)
	}
	winSameMultiset(t, "after restore", out.take(), [][]int64{{3, 1, 2, 10, 20, 0}})
	if got := re.(operator.LateCounter).LateRows(); got != 2 {
		t.Fatalf("late rows %d, want 2", got)
	}
	if err := re.Flush(out); err != nil {
		t.Fatal(err)
	}
	parts, err = re.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer operator.ReleaseStates(parts)
	var all [][]int64
	for _, rows := range winStateRows(t, parts, re.StateSchema()) {
		all = append(all, rows...)
	}
	winSameMultiset(t, "state after restore", all, [][]int64{{0, 3, 1, 10, 20, 22}, {1, 3, 2, 20, 18, 22}})
}
