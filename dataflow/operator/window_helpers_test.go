package operator_test

// Test support shared by the window and join tests: batches from rows, a
// collecting emitter, a harness that drives one or more instances through a
// list of events with cuts (snapshot, crash, restore), and a generator of
// event-time inputs with bounded disorder.

import (
	"bytes"
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
	"github.com/rewind-engine/rewind/dataflow/state"
)

// winRow is one input row in winInSchema order: id, key, value, ts.
type winRow = []int64

// winInSchema mirrors the source schema (id, key, value, ts). The tests keep
// their own copy so they do not depend on the source package.
var winInSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// Column indexes of winInSchema.
const (
	winIdxID = iota
	winIdxKey
	winIdxValue
	winIdxTS
)

// winBatch builds an int64 batch of schema from rows, a column at a time
// (the checked allocator is slow per allocation).
func winBatch(t testing.TB, mem memory.Allocator, schema *arrow.Schema, rows [][]int64) arrow.RecordBatch {
	t.Helper()
	cols := make([][]int64, schema.NumFields())
	for _, r := range rows {
		if len(r) != len(cols) {
			t.Fatalf("row %v has %d values, schema has %d fields", r, len(r), len(cols))
		}
		for i, v := range r {
			cols[i] = append(cols[i], v)
		}
	}
	arrs := make([]arrow.Array, len(cols))
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for i, c := range cols {
		b.Reserve(len(c))
		b.AppendValues(c, nil)
		arrs[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(schema, arrs, int64(len(rows)))
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

// winRowsOf copies the rows of an all-int64 batch.
func winRowsOf(t testing.TB, b arrow.RecordBatch) [][]int64 {
	t.Helper()
	cols := make([][]int64, b.NumCols())
	for i := range cols {
		a, ok := b.Column(i).(*array.Int64)
		if !ok {
			t.Fatalf("column %s is %s, want int64", b.ColumnName(i), b.Column(i).DataType())
		}
		if a.NullN() != 0 {
			t.Fatalf("column %s has nulls", b.ColumnName(i))
		}
		cols[i] = a.Int64Values()
	}
	rows := make([][]int64, b.NumRows())
	for r := range rows {
		row := make([]int64, len(cols))
		for c := range cols {
			row[c] = cols[c][r]
		}
		rows[r] = row
	}
	return rows
}

// winSink collects emitted rows (copied, so it never retains a batch) and
// checks every batch has the operator's output schema.
type winSink struct {
	t      testing.TB
	schema *arrow.Schema
	rows   [][]int64
}

func (s *winSink) Emit(b arrow.RecordBatch) error {
	s.t.Helper()
	if !b.Schema().Equal(s.schema) {
		s.t.Fatalf("emitted schema %s, want %s", b.Schema(), s.schema)
	}
	if b.NumRows() == 0 {
		s.t.Fatalf("emitted an empty batch")
	}
	s.rows = append(s.rows, winRowsOf(s.t, b)...)
	return nil
}

// take returns the rows collected so far and forgets them.
func (s *winSink) take() [][]int64 {
	r := s.rows
	s.rows = nil
	return r
}

func winSorted(rows [][]int64) [][]int64 {
	out := slices.Clone(rows)
	slices.SortFunc(out, slices.Compare)
	return out
}

// winSameMultiset fails the test when got and want differ as multisets,
// printing context (the seed) and the first differences.
func winSameMultiset(t testing.TB, context string, got, want [][]int64) {
	t.Helper()
	g, w := winSorted(got), winSorted(want)
	if slices.EqualFunc(g, w, slices.Equal) {
		return
	}
	var missing, extra [][]int64
	i, j := 0, 0
	for i < len(g) || j < len(w) {
		switch {
		case j == len(w) || (i < len(g) && slices.Compare(g[i], w[j]) < 0):
			extra = append(extra, g[i])
			i++
		case i == len(g) || slices.Compare(g[i], w[j]) > 0:
			missing = append(missing, w[j])
			j++
		default:
			i++
			j++
		}
	}
	t.Fatalf("%s: got %d rows, want %d; missing %v; unexpected %v",
		context, len(got), len(want), winFirst(missing), winFirst(extra))
}

func winFirst(rows [][]int64) string {
	if len(rows) > 5 {
		return fmt.Sprintf("%v … (%d in all)", rows[:5], len(rows))
	}
	return fmt.Sprint(rows)
}

// winOpen opens op with a fresh context owning r.
func winOpen(t testing.TB, op operator.Operator, mem memory.Allocator, r keygroup.Range) {
	t.Helper()
	if err := op.Open(operator.Context{Alloc: mem, Parallelism: 1, KeyGroups: r}); err != nil {
		t.Fatalf("open: %v", err)
	}
}

// winStateRows reads snapshot parts into key group → rows, checking every
// part is for a distinct key group, has the state schema and is not empty.
func winStateRows(t testing.TB, parts []operator.KeyGroupState, schema *arrow.Schema) map[int][][]int64 {
	t.Helper()
	out := make(map[int][][]int64)
	seen := make(map[int]bool)
	for _, p := range parts {
		if seen[p.KeyGroup] {
			t.Fatalf("key group %d snapshotted twice", p.KeyGroup)
		}
		seen[p.KeyGroup] = true
		if !p.Batch.Schema().Equal(schema) {
			t.Fatalf("state schema %s, want %s", p.Batch.Schema(), schema)
		}
		if p.Batch.NumRows() == 0 {
			t.Fatalf("key group %d snapshotted with no rows", p.KeyGroup)
		}
		out[p.KeyGroup] = winRowsOf(t, p.Batch)
	}
	return out
}

// winRoundTrip encodes parts with the state codec, releases them, and
// returns the decoded copies: a restored instance sees only what a recovery
// point really holds.
func winRoundTrip(t testing.TB, mem memory.Allocator, parts []operator.KeyGroupState) []operator.KeyGroupState {
	t.Helper()
	var buf bytes.Buffer
	err := state.EncodeAll(&buf, "op", parts)
	operator.ReleaseStates(parts)
	if err != nil {
		t.Fatalf("encode state: %v", err)
	}
	_, out, err := state.DecodeAll(buf.Bytes(), mem)
	if err != nil {
		t.Fatalf("decode state: %v", err)
	}
	return out
}

// winEvent is one step of a run: a batch on a port, a watermark, or a Flush.
type winEvent struct {
	kind int
	port int
	rows [][]int64
	wm   int64
}

const (
	winEvBatch = iota
	winEvWatermark
	winEvFlush
)

// winInst is one running instance and the key groups it owns.
type winInst struct {
	op operator.Stateful
	r  keygroup.Range
}

// winHarness drives instances of one operator through events, routing each
// row to the instance owning its key group, like a hash exchange would.
type winHarness struct {
	t     testing.TB
	mem   memory.Allocator
	newOp func() (operator.Stateful, error)
	in    *arrow.Schema
	insts []winInst
	out   *winSink
	late  int64 // late rows of instances already closed
}

func newWinHarness(t testing.TB, mem memory.Allocator, in *arrow.Schema, newOp func() (operator.Stateful, error)) *winHarness {
	op, err := newOp()
	if err != nil {
		t.Fatalf("new operator: %v", err)
	}
	h := &winHarness{t: t, mem: mem, newOp: newOp, in: in, out: &winSink{t: t, schema: op.OutputSchema()}}
	op.Close()
	return h
}

// start opens one instance per range and restores into each the parts of
// its key groups. It releases parts.
func (h *winHarness) start(parts []operator.KeyGroupState, ranges ...keygroup.Range) {
	h.t.Helper()
	defer operator.ReleaseStates(parts)
	for _, r := range ranges {
		op, err := h.newOp()
		if err != nil {
			h.t.Fatalf("new operator: %v", err)
		}
		winOpen(h.t, op, h.mem, r)
		var mine []operator.KeyGroupState
		for _, p := range parts {
			if r.Contains(p.KeyGroup) {
				mine = append(mine, p)
			}
		}
		if parts != nil {
			if err := op.Restore(mine); err != nil {
				h.t.Fatalf("restore into %v: %v", r, err)
			}
		}
		h.insts = append(h.insts, winInst{op: op, r: r})
	}
}

func (h *winHarness) apply(ev winEvent) {
	h.t.Helper()
	for _, in := range h.insts {
		switch ev.kind {
		case winEvWatermark:
			if err := in.op.AdvanceWatermark(ev.wm, h.out); err != nil {
				h.t.Fatalf("advance watermark %d: %v", ev.wm, err)
			}
		case winEvFlush:
			if err := in.op.Flush(h.out); err != nil {
				h.t.Fatalf("flush: %v", err)
			}
		case winEvBatch:
			var mine [][]int64
			for _, r := range ev.rows {
				if in.r.Contains(keygroup.Of(r[winIdxKey])) {
					mine = append(mine, r)
				}
			}
			if len(mine) == 0 {
				continue
			}
			b := winBatch(h.t, h.mem, h.in, mine)
			err := in.op.Process(ev.port, b, h.out)
			b.Release()
			if err != nil {
				h.t.Fatalf("process: %v", err)
			}
		}
	}
}

// snapshot flushes every instance and returns all their parts.
func (h *winHarness) snapshot() []operator.KeyGroupState {
	h.t.Helper()
	var parts []operator.KeyGroupState
	for _, in := range h.insts {
		if err := in.op.Flush(h.out); err != nil {
			h.t.Fatalf("flush: %v", err)
		}
		p, err := in.op.Snapshot()
		if err != nil {
			h.t.Fatalf("snapshot: %v", err)
		}
		parts = append(parts, p...)
	}
	return parts
}

// crash snapshots, closes every instance (their memory is gone) and returns
// the parts after a round trip through the codec.
func (h *winHarness) crash() []operator.KeyGroupState {
	h.t.Helper()
	parts := h.snapshot()
	h.closeAll()
	return winRoundTrip(h.t, h.mem, parts)
}

func (h *winHarness) closeAll() {
	for _, in := range h.insts {
		h.late += in.op.(operator.LateCounter).LateRows()
		if err := in.op.Close(); err != nil {
			h.t.Fatalf("close: %v", err)
		}
	}
	h.insts = nil
}

// lateRows is the total of late rows of every instance so far.
func (h *winHarness) lateRows() int64 {
	n := h.late
	for _, in := range h.insts {
		n += in.op.(operator.LateCounter).LateRows()
	}
	return n
}

// winGenConfig shapes generated input: per port, partitions whose rows each
// have ts >= (max ts seen before in the partition) - disorder.
type winGenConfig struct {
	ports, partsPerPort, rowsPerPart int
	keys                             int64 // keys are in [-keys/2, keys/2)
	disorder, maxStep, tsStart       int64
	maxChunk                         int
	lateProb                         float64 // chance of a late row after each watermark
	lateSpan                         int64   // how far below the watermark a late row goes
}

// winGenerate returns a random interleaving of the partitions as events: a
// batch of 1..maxChunk rows from one partition, after which (usually) the
// watermark min over partitions of (max ts seen) - disorder; and every input
// row per port, for the relational oracle. With lateProb 0 every row keeps
// the watermark's promise.
func winGenerate(rng *rand.Rand, c winGenConfig) (events []winEvent, rows [2][][]int64) {
	type part struct {
		port int
		rows [][]int64
		next int
		max  int64
	}
	var parts []*part
	id := int64(1)
	for port := range c.ports {
		for range c.partsPerPort {
			p := &part{port: port, max: operator.NoWatermark}
			base := c.tsStart
			for range c.rowsPerPart {
				base += rng.Int64N(c.maxStep + 1)
				ts := base - rng.Int64N(c.disorder+1)
				r := winRow{id, rng.Int64N(c.keys) - c.keys/2, rng.Int64N(151) - 50, ts}
				id++
				p.rows = append(p.rows, r)
				rows[port] = append(rows[port], r)
			}
			parts = append(parts, p)
		}
	}
	wm := operator.NoWatermark
	for {
		var open []*part
		for _, p := range parts {
			if p.next < len(p.rows) {
				open = append(open, p)
			}
		}
		if len(open) == 0 {
			break
		}
		p := open[rng.IntN(len(open))]
		n := min(1+rng.IntN(c.maxChunk), len(p.rows)-p.next)
		chunk := p.rows[p.next : p.next+n]
		p.next += n
		for _, r := range chunk {
			p.max = max(p.max, r[winIdxTS])
		}
		events = append(events, winEvent{kind: winEvBatch, port: p.port, rows: chunk})
		if rng.IntN(10) < 7 {
			low := operator.EndOfTime
			for _, q := range parts {
				low = min(low, q.max)
			}
			if low != operator.NoWatermark {
				wm = max(wm, low-c.disorder)
			}
			// Now and then repeat an older watermark: it must be ignored.
			if rng.IntN(10) == 0 && wm != operator.NoWatermark {
				events = append(events, winEvent{kind: winEvWatermark, wm: wm - rng.Int64N(5)})
			} else {
				events = append(events, winEvent{kind: winEvWatermark, wm: wm})
			}
			if wm != operator.NoWatermark && rng.Float64() < c.lateProb {
				r := winRow{id, rng.Int64N(c.keys) - c.keys/2, rng.Int64N(151) - 50, wm - 1 - rng.Int64N(c.lateSpan)}
				id++
				events = append(events, winEvent{kind: winEvBatch, port: rng.IntN(c.ports), rows: [][]int64{r}})
			}
		}
		if rng.IntN(5) == 0 {
			events = append(events, winEvent{kind: winEvFlush})
		}
	}
	return events, rows
}

// winStateCompare checks two snapshots hold the same rows per key group.
func winStateCompare(t testing.TB, context string, got, want map[int][][]int64) {
	t.Helper()
	for kg := range keygroup.Count {
		if !slices.EqualFunc(got[kg], want[kg], slices.Equal) {
			t.Fatalf("%s: key group %d state differs:\n got %v\nwant %v", context, kg, winFirst(got[kg]), winFirst(want[kg]))
		}
	}
}

// winCuts returns n distinct sorted cut points in (0, len).
func winCuts(rng *rand.Rand, n, length int) []int {
	if length < 2 {
		return nil
	}
	cuts := make([]int, 0, n)
	for range n {
		cuts = append(cuts, 1+rng.IntN(length-1))
	}
	slices.Sort(cuts)
	return slices.Compact(cuts)
}

// winOrderProperty runs events on one instance that owns every key group,
// then a watermark at EndOfTime. Input that keeps the disorder bound must
// give no late row, and the output must be want, the relational answer,
// however the generator interleaved the partitions. ctx names the case
// (seed and configuration) in failures.
func winOrderProperty(t *testing.T, ctx string, mem memory.Allocator, in *arrow.Schema,
	newOp func() (operator.Stateful, error), events []winEvent, want [][]int64) {
	t.Helper()
	h := newWinHarness(t, mem, in, newOp)
	h.start(nil, keygroup.All)
	for _, ev := range events {
		h.apply(ev)
	}
	h.apply(winEvent{kind: winEvWatermark, wm: operator.EndOfTime})
	if late := h.lateRows(); late != 0 {
		t.Fatalf("%s: %d late rows from input within the disorder bound", ctx, late)
	}
	h.closeAll()
	winSameMultiset(t, ctx, h.out.rows, want)
}

// winSnapshotProperty runs events uninterrupted on one instance, and again
// with crashes at random cuts: Flush, Snapshot, close (the memory is gone),
// encode and decode, restore into a fresh instance, continue. Both runs must
// end in the same state, emit the same multiset of rows and count the same
// late rows.
//
// When a snapshot has no part at all, the restored instance cannot know the
// watermark (see winRestoreWatermarks); the harness then re-delivers the last
// watermark right after Restore, as an executor that records it does.
func winSnapshotProperty(t *testing.T, seed uint64, mem memory.Allocator, in *arrow.Schema,
	newOp func() (operator.Stateful, error), events []winEvent) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	cuts := winCuts(rng, 1+rng.IntN(3), len(events))
	ctx := fmt.Sprintf("seed %d cuts %v", seed, cuts)
	stateOf := func(h *winHarness) map[int][][]int64 {
		parts := h.snapshot()
		defer operator.ReleaseStates(parts)
		return winStateRows(t, parts, h.insts[0].op.StateSchema())
	}

	ref := newWinHarness(t, mem, in, newOp)
	ref.start(nil, keygroup.All)
	for _, ev := range events {
		ref.apply(ev)
	}
	refState := stateOf(ref)
	ref.apply(winEvent{kind: winEvWatermark, wm: operator.EndOfTime})
	refLate := ref.lateRows()
	ref.closeAll()

	cut := newWinHarness(t, mem, in, newOp)
	cut.start(nil, keygroup.All)
	from, lastWM, restoredParts := 0, operator.NoWatermark, 0
	for _, c := range cuts {
		for _, ev := range events[from:c] {
			cut.apply(ev)
			if ev.kind == winEvWatermark {
				lastWM = max(lastWM, ev.wm)
			}
		}
		from = c
		parts := cut.crash()
		restoredParts += len(parts)
		empty := len(parts) == 0
		cut.start(parts, keygroup.All)
		if empty && lastWM != operator.NoWatermark {
			cut.apply(winEvent{kind: winEvWatermark, wm: lastWM})
		}
	}
	for _, ev := range events[from:] {
		cut.apply(ev)
	}
	winStateCompare(t, ctx, stateOf(cut), refState)
	cut.apply(winEvent{kind: winEvWatermark, wm: operator.EndOfTime})
	if got := cut.lateRows(); got != refLate {
		t.Fatalf("%s: late rows %d after crashes, %d uninterrupted", ctx, got, refLate)
	}
	cut.closeAll()
	winSameMultiset(t, ctx, cut.out.rows, ref.out.rows)
	if len(ref.out.rows) == 0 {
		t.Fatalf("%s: no output at all; the test input is too thin", ctx)
	}
}

// winRescaleProperty checks, with optest.CheckSnapshot, that a snapshot
// restored into 2 and into 3 instances, each given only its key groups and
// only rows of its key groups, emits the same rows after the cut and ends in
// the same state as the uninterrupted run. The steps end with a watermark
// above every earlier one so every instance ends at the same watermark (an
// instance restored from no part learns it only from a watermark).
func winRescaleProperty(t *testing.T, seed uint64, mem memory.Allocator, inputs []*arrow.Schema,
	newOp func() (operator.Stateful, error), events []winEvent) {
	t.Helper()
	var steps []optest.Step
	last := operator.NoWatermark
	for _, ev := range events {
		switch ev.kind {
		case winEvBatch:
			steps = append(steps, optest.In(ev.port, ev.rows...))
		case winEvWatermark:
			steps = append(steps, optest.WM(ev.wm))
			last = max(last, ev.wm)
		}
	}
	steps = append(steps, optest.WM(max(last, 0)+1))
	rng := rand.New(rand.NewPCG(seed, 7))
	keys := make([]string, len(inputs))
	for i := range keys {
		keys[i] = "key"
	}
	for _, n := range []int{2, 3} {
		optest.CheckSnapshot(t, optest.Case{New: newOp, Inputs: inputs, KeyColumns: keys,
			Steps: steps, Cut: rng.IntN(len(steps) + 1), Restore: n, Alloc: mem, Seed: seed})
	}
}

// winFloorDiv is the floor of a/b for b > 0, the test's own formula.
func winFloorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) {
		q--
	}
	return q
}

// winPartMaker returns a builder of state parts in op's state schema, to
// hand Restore by hand; it closes op, which only gave the schema.
func winPartMaker(t testing.TB, mem memory.Allocator, op operator.Stateful) func(kg int, rows ...[]int64) operator.KeyGroupState {
	schema := op.StateSchema()
	op.Close()
	return func(kg int, rows ...[]int64) operator.KeyGroupState {
		return operator.KeyGroupState{KeyGroup: kg, Batch: winBatch(t, mem, schema, rows)}
	}
}

// winRestoreCase is one state Restore must refuse: the key groups the
// instance owns, the parts handed to it, a phrase the error must contain.
type winRestoreCase struct {
	name  string
	r     keygroup.Range
	parts []operator.KeyGroupState
	want  string
}

// winExpectRestoreRejects restores each case's parts into a fresh instance
// and checks that Restore refuses them with the expected error.
func winExpectRestoreRejects(t *testing.T, mem memory.Allocator, newOp func() operator.Stateful, cases []winRestoreCase) {
	t.Helper()
	for _, tc := range cases {
		op := newOp()
		winOpen(t, op, mem, tc.r)
		err := op.Restore(tc.parts)
		operator.ReleaseStates(tc.parts)
		op.Close()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: restore error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}
