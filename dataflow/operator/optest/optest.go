// Package optest is test support for operators and executors: an Emitter
// that collects output, a batch builder, and a property check that snapshot,
// encode, decode and restore (possibly at another parallelism) do not change
// what an operator computes.
//
// Tests of package operator that use it must live in package operator_test
// (optest imports operator).
package optest

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// TB is the part of testing.TB optest uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Batch builds a batch of schema from rows (one []int64 per row, one value
// per column). Every column of schema must be int64. The caller releases it.
func Batch(alloc memory.Allocator, schema *arrow.Schema, rows [][]int64) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for c := range cols {
		if t := schema.Field(c).Type; t.ID() != arrow.INT64 {
			panic(fmt.Sprintf("optest.Batch: column %q is %s, only int64 is supported", schema.Field(c).Name, t))
		}
		arr, vals := operator.AllocInt64(alloc, len(rows))
		for r, row := range rows {
			if len(row) != len(cols) {
				panic(fmt.Sprintf("optest.Batch: row %d has %d values, schema has %d columns", r, len(row), len(cols)))
			}
			vals[r] = row[c]
		}
		cols[c] = arr
	}
	return operator.NewBatchOwning(schema, len(rows), cols...)
}

// Rows copies the values of an all-int64 batch into rows. Nulls read as 0.
func Rows(b arrow.RecordBatch) [][]int64 {
	n, nc := int(b.NumRows()), int(b.NumCols())
	rows := make([][]int64, n)
	flat := make([]int64, n*nc)
	for r := range rows {
		rows[r] = flat[r*nc : (r+1)*nc : (r+1)*nc]
	}
	for c := 0; c < nc; c++ {
		col, ok := b.Column(c).(*array.Int64)
		if !ok {
			panic(fmt.Sprintf("optest.Rows: column %q is %s, only int64 is supported", b.ColumnName(c), b.Column(c).DataType()))
		}
		for r, v := range col.Int64Values() {
			if col.IsValid(r) {
				rows[r][c] = v
			}
		}
	}
	return rows
}

// Collector is an Emitter that copies every emitted batch into Rows and, if
// Keep is set, also retains the batch itself in Batches (release them with
// Release). It checks what every executor relies on: each batch has the
// expected schema when Schema is set.
type Collector struct {
	Schema  *arrow.Schema // if set, every batch must have exactly this schema
	Keep    bool          // retain emitted batches in Batches
	Rows    [][]int64
	Batches []arrow.RecordBatch
	Emits   int // number of Emit calls
}

// Emit implements operator.Emitter.
func (c *Collector) Emit(b arrow.RecordBatch) error {
	if c.Schema != nil && !b.Schema().Equal(c.Schema) {
		return fmt.Errorf("optest.Collector: emitted schema %s, want %s", b.Schema(), c.Schema)
	}
	c.Emits++
	c.Rows = append(c.Rows, Rows(b)...)
	if c.Keep {
		b.Retain()
		c.Batches = append(c.Batches, b)
	}
	return nil
}

// Reset forgets the collected rows and releases kept batches.
func (c *Collector) Reset() {
	c.Release()
	c.Rows, c.Emits = nil, 0
}

// Release releases the kept batches.
func (c *Collector) Release() {
	for _, b := range c.Batches {
		b.Release()
	}
	c.Batches = nil
}

// Sorted returns rows sorted lexicographically, for comparing multisets of
// rows. rows itself is not modified.
func Sorted(rows [][]int64) [][]int64 {
	out := slices.Clone(rows)
	slices.SortFunc(out, slices.Compare)
	return out
}

// Step is one input event of a Case: a batch of Rows on input Port, or, if
// IsWatermark, a watermark WM delivered to the operator.
type Step struct {
	Port        int
	Rows        [][]int64
	IsWatermark bool
	WM          int64
}

// In is a Step delivering rows on port.
func In(port int, rows ...[]int64) Step { return Step{Port: port, Rows: rows} }

// WM is a Step advancing the watermark to wm.
func WM(wm int64) Step { return Step{IsWatermark: true, WM: wm} }

// Case describes one run of CheckSnapshot.
type Case struct {
	// New returns a fresh, unopened instance of the operator under test.
	New func() (operator.Stateful, error)
	// Inputs are the input schemas by port (all int64 columns) and
	// KeyColumns the key column of each port, used to route rows to the
	// instance owning their key group after re-scaling.
	Inputs     []*arrow.Schema
	KeyColumns []string
	// Steps is the input. Both runs Flush after every step, as an
	// executor does at the end of each unit of input.
	Steps []Step
	// Cut is the number of steps before the recovery point.
	Cut int
	// Restore is the parallelism restored into after the cut; 0 means 1.
	// Before the cut a single instance owning every key group runs.
	Restore int
	// Alloc backs every batch, state and decoded blob; pass a checked
	// allocator to catch leaks. nil means memory.DefaultAllocator.
	Alloc memory.Allocator
	// Seed is printed in failure messages, to reproduce a random case.
	Seed uint64
}

// Result is what CheckSnapshot observed, for extra assertions.
type Result struct {
	// After are the rows emitted after the cut (sorted), identical in both
	// runs; Final is the final state, as sorted rows of the state schema.
	After, Final [][]int64
}

// CheckSnapshot checks that a recovery point does not change what the
// operator computes. It runs the Steps once without interruption on one
// instance owning all key groups. At the cut it also takes a Snapshot (after
// Flush), keeps processing, and only then encodes the snapshot with package
// state - so a snapshot sharing memory with live state is caught. It decodes
// the blob, restores it into Restore fresh instances (each given only its
// key groups, keygroup.RangeFor) and feeds them the remaining steps, rows
// routed by key group and watermarks broadcast. Then it requires the same
// multiset of rows emitted after the cut and the same final state (the
// union of all instances' snapshots after the last step's Flush).
func CheckSnapshot(t TB, c Case) Result {
	t.Helper()
	ck := &checker{t: t, c: c, alloc: c.Alloc}
	if ck.alloc == nil {
		ck.alloc = memory.DefaultAllocator
	}
	if c.Restore <= 0 {
		ck.c.Restore = 1
	}
	if c.Cut < 0 || c.Cut > len(c.Steps) {
		ck.fatalf("cut %d outside [0,%d]", c.Cut, len(c.Steps))
	}
	if len(c.KeyColumns) != len(c.Inputs) {
		ck.fatalf("%d key columns for %d inputs", len(c.KeyColumns), len(c.Inputs))
	}
	ck.keyIdx = make([]int, len(c.Inputs))
	for p, s := range c.Inputs {
		idx, err := operator.Int64ColumnIndex(s, c.KeyColumns[p])
		if err != nil {
			ck.fatalf("input %d: %v", p, err)
		}
		ck.keyIdx[p] = idx
	}
	return ck.run()
}

type checker struct {
	t      TB
	c      Case
	alloc  memory.Allocator
	keyIdx []int
}

func (ck *checker) fatalf(format string, args ...any) {
	ck.t.Helper()
	ck.t.Fatalf("optest (seed %d, cut %d of %d steps, restore into %d): %s",
		ck.c.Seed, ck.c.Cut, len(ck.c.Steps), ck.c.Restore, fmt.Sprintf(format, args...))
}

func (ck *checker) open(subtask, parallelism int) operator.Stateful {
	ck.t.Helper()
	op, err := ck.c.New()
	if err != nil {
		ck.fatalf("new operator: %v", err)
	}
	ctx := operator.Context{Alloc: ck.alloc, Subtask: subtask, Parallelism: parallelism,
		KeyGroups: keygroup.RangeFor(subtask, parallelism)}
	if err := op.Open(ctx); err != nil {
		ck.fatalf("open subtask %d/%d: %v", subtask, parallelism, err)
	}
	return op
}

// step delivers one step to the instances ops (by key group when several),
// then flushes them all.
func (ck *checker) step(i int, ops []operator.Stateful, out operator.Emitter) {
	ck.t.Helper()
	s := ck.c.Steps[i]
	if s.IsWatermark {
		for _, op := range ops {
			if err := op.AdvanceWatermark(s.WM, out); err != nil {
				ck.fatalf("step %d: watermark %d: %v", i, s.WM, err)
			}
		}
	} else {
		if s.Port < 0 || s.Port >= len(ck.c.Inputs) {
			ck.fatalf("step %d: port %d has no input schema", i, s.Port)
		}
		byOp := make([][][]int64, len(ops))
		for _, r := range s.Rows {
			o := keygroup.Owner(keygroup.Of(r[ck.keyIdx[s.Port]]), len(ops))
			byOp[o] = append(byOp[o], r)
		}
		for o, rows := range byOp {
			if len(rows) == 0 && len(ops) > 1 {
				continue
			}
			b := Batch(ck.alloc, ck.c.Inputs[s.Port], rows)
			err := ops[o].Process(s.Port, b, out)
			b.Release()
			if err != nil {
				ck.fatalf("step %d: process on port %d: %v", i, s.Port, err)
			}
		}
	}
	for _, op := range ops {
		if err := op.Flush(out); err != nil {
			ck.fatalf("step %d: flush: %v", i, err)
		}
	}
}

func (ck *checker) run() Result {
	ck.t.Helper()
	c := ck.c

	// (a) uninterrupted, snapshotting at the cut.
	whole := ck.open(0, 1)
	defer whole.Close()
	var before, afterA Collector
	afterA.Schema = whole.OutputSchema()
	var snap []operator.KeyGroupState
	defer func() { operator.ReleaseStates(snap) }()
	for i := range c.Steps {
		if i == c.Cut {
			snap = ck.snapshot(whole, "at the cut")
		}
		out := &before
		if i >= c.Cut {
			out = &afterA
		}
		ck.step(i, []operator.Stateful{whole}, out)
	}
	if c.Cut == len(c.Steps) {
		snap = ck.snapshot(whole, "at the cut")
	}
	finalA := ck.finalRows([]operator.Stateful{whole})

	// Encode only now: the snapshot must not have changed while the
	// operator kept running.
	var buf bytes.Buffer
	if err := state.EncodeAll(&buf, "op", snap); err != nil {
		ck.fatalf("encode: %v", err)
	}
	_, decoded, err := state.DecodeAll(buf.Bytes(), ck.alloc)
	if err != nil {
		ck.fatalf("decode: %v", err)
	}
	defer func() { operator.ReleaseStates(decoded) }()

	// (b) restored into c.Restore instances.
	ops := make([]operator.Stateful, c.Restore)
	for s := range ops {
		ops[s] = ck.open(s, c.Restore)
		defer ops[s].Close()
		r := keygroup.RangeFor(s, c.Restore)
		var mine []operator.KeyGroupState
		for _, p := range decoded {
			if r.Contains(p.KeyGroup) {
				mine = append(mine, p)
			}
		}
		if err := ops[s].Restore(mine); err != nil {
			ck.fatalf("restore subtask %d: %v", s, err)
		}
	}
	var afterB Collector
	afterB.Schema = ops[0].OutputSchema()
	for i := c.Cut; i < len(c.Steps); i++ {
		ck.step(i, ops, &afterB)
	}
	finalB := ck.finalRows(ops)

	a, b := Sorted(afterA.Rows), Sorted(afterB.Rows)
	if !slices.EqualFunc(a, b, slices.Equal) {
		ck.fatalf("output after the cut differs:\n%s", diff(a, b))
	}
	if !slices.EqualFunc(finalA, finalB, slices.Equal) {
		ck.fatalf("final state differs:\n%s", diff(finalA, finalB))
	}
	return Result{After: a, Final: finalA}
}

// snapshot takes a Snapshot and checks its parts are well formed.
func (ck *checker) snapshot(op operator.Stateful, when string) []operator.KeyGroupState {
	ck.t.Helper()
	parts, err := op.Snapshot()
	if err != nil {
		ck.fatalf("snapshot %s: %v", when, err)
	}
	seen := map[int]bool{}
	for _, p := range parts {
		if p.Batch == nil || !p.Batch.Schema().Equal(op.StateSchema()) {
			operator.ReleaseStates(parts)
			ck.fatalf("snapshot %s: key group %d: batch missing or not of the state schema", when, p.KeyGroup)
		}
		if seen[p.KeyGroup] {
			operator.ReleaseStates(parts)
			ck.fatalf("snapshot %s: key group %d appears twice", when, p.KeyGroup)
		}
		seen[p.KeyGroup] = true
	}
	return parts
}

// finalRows snapshots every instance and returns all state rows, sorted.
func (ck *checker) finalRows(ops []operator.Stateful) [][]int64 {
	ck.t.Helper()
	var rows [][]int64
	for _, op := range ops {
		parts := ck.snapshot(op, "at the end")
		for _, p := range parts {
			rows = append(rows, Rows(p.Batch)...)
		}
		operator.ReleaseStates(parts)
	}
	return Sorted(rows)
}

// diff renders the rows only in a and only in b (both sorted), at most 20
// of each.
func diff(a, b [][]int64) string {
	var onlyA, onlyB []string
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && slices.Compare(a[i], b[j]) < 0):
			onlyA = append(onlyA, fmt.Sprint(a[i]))
			i++
		case i == len(a) || slices.Compare(a[i], b[j]) > 0:
			onlyB = append(onlyB, fmt.Sprint(b[j]))
			j++
		default:
			i++
			j++
		}
	}
	clip := func(s []string) string {
		sort.Strings(s)
		if len(s) > 20 {
			s = append(s[:20], fmt.Sprintf("... %d more", len(s)-20))
		}
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("  only uninterrupted (%d): %s\n  only restored (%d): %s",
		len(onlyA), clip(onlyA), len(onlyB), clip(onlyB))
}
