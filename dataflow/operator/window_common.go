package operator

// Helpers shared by the event-time operators (window aggregation and interval
// join): int64 column lookup and reading, output batch building, timers, and
// the per-key-group watermark bookkeeping both keep in their state.

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// winEmitRows caps the rows of one emitted batch so a watermark that fires
// many windows at once (EndOfTime) does not build one huge batch.
const winEmitRows = 1 << 14

// winVersionColumn is the version column every output row carries (the
// sink's contract, sink.VersionColumn); the event-time operators always
// write version 0 because each output row is final when emitted.
const winVersionColumn = "_version"

// winWatermarkColumn is the state column holding the key group's watermark.
const winWatermarkColumn = "watermark"

// winSchemaString renders a schema on one line for error messages, e.g.
// (id int64, key int64), the form the package's other operators use.
func winSchemaString(s *arrow.Schema) string {
	if s == nil {
		return "(nil schema)"
	}
	parts := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		parts[i] = f.Name + " " + f.Type.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// winInt64Column returns the index of the int64 column name in s; role says
// what the column is for, so the error tells the user which spec field is
// wrong.
func winInt64Column(s *arrow.Schema, name, role string) (int, error) {
	if s == nil {
		return 0, fmt.Errorf("%s column %q: no input schema", role, name)
	}
	if name == "" {
		return 0, fmt.Errorf("%s column not set (schema %s)", role, winSchemaString(s))
	}
	idx := s.FieldIndices(name)
	switch {
	case len(idx) == 0:
		return 0, fmt.Errorf("%s column %q not found in schema %s", role, name, winSchemaString(s))
	case len(idx) > 1:
		return 0, fmt.Errorf("%s column %q appears %d times in schema %s", role, name, len(idx), winSchemaString(s))
	}
	if t := s.Field(idx[0]).Type; !arrow.TypeEqual(t, arrow.PrimitiveTypes.Int64) {
		return 0, fmt.Errorf("%s column %q has type %s, want int64 (schema %s)", role, name, t, winSchemaString(s))
	}
	return idx[0], nil
}

// winInt64Values returns the values of column idx of b without copying. The
// column must be the named int64 column without nulls: a batch that does not
// match the schema the operator was built for is an error, not a silent
// misread.
func winInt64Values(b arrow.RecordBatch, idx int, name string) ([]int64, error) {
	if idx >= int(b.NumCols()) || b.ColumnName(idx) != name {
		return nil, fmt.Errorf("batch does not match the operator's input: column %d is not %q (batch schema %s)",
			idx, name, winSchemaString(b.Schema()))
	}
	a, ok := b.Column(idx).(*array.Int64)
	if !ok {
		return nil, fmt.Errorf("column %q is %s, want int64 (batch schema %s)", name, b.Column(idx).DataType(), winSchemaString(b.Schema()))
	}
	if a.NullN() > 0 {
		return nil, fmt.Errorf("column %q has %d nulls; event-time operators need every value", name, a.NullN())
	}
	return a.Int64Values(), nil
}

// winInt64Schema builds a schema of non-nullable int64 columns.
func winInt64Schema(names ...string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64}
	}
	return arrow.NewSchema(fields, nil)
}

// winColumns accumulates rows column by column in Go slices that are reused
// between batches, then turns them into Arrow batches.
type winColumns struct {
	schema *arrow.Schema
	cols   [][]int64
}

func newWinColumns(schema *arrow.Schema) winColumns {
	return winColumns{schema: schema, cols: make([][]int64, schema.NumFields())}
}

func (c *winColumns) len() int { return len(c.cols[0]) }

func (c *winColumns) reset() {
	for i := range c.cols {
		c.cols[i] = c.cols[i][:0]
	}
}

// batch builds one batch from rows [from, to) with memory from alloc.
func (c *winColumns) batch(alloc memory.Allocator, from, to int) arrow.RecordBatch {
	arrs := make([]arrow.Array, len(c.cols))
	for i, col := range c.cols {
		arrs[i] = winInt64Array(alloc, col[from:to])
	}
	rec := array.NewRecordBatch(c.schema, arrs, int64(to-from))
	for _, a := range arrs {
		a.Release()
	}
	return rec
}

// winInt64Array copies vals into a new int64 array without a validity
// bitmap: one allocation, where a builder would make two and append value
// by value.
func winInt64Array(alloc memory.Allocator, vals []int64) arrow.Array {
	buf := memory.NewResizableBuffer(alloc)
	buf.Resize(len(vals) * arrow.Int64SizeBytes)
	copy(arrow.Int64Traits.CastFromBytes(buf.Bytes()), vals)
	data := array.NewData(arrow.PrimitiveTypes.Int64, len(vals), []*memory.Buffer{nil, buf}, nil, 0, 0)
	arr := array.NewInt64Data(data)
	data.Release()
	buf.Release()
	return arr
}

// emit hands the accumulated rows to out in batches of at most winEmitRows,
// releasing each batch after Emit returns, and resets the columns.
func (c *winColumns) emit(alloc memory.Allocator, out Emitter) error {
	defer c.reset()
	n := c.len()
	for from := 0; from < n; from += winEmitRows {
		rec := c.batch(alloc, from, min(from+winEmitRows, n))
		err := out.Emit(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// winTimer is one entry of a timer heap: it is due at `at`; key and aux
// (the window start, for windows) break ties so firing order is total.
type winTimer struct{ at, key, aux int64 }

func (a winTimer) less(b winTimer) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.key != b.key {
		return a.key < b.key
	}
	return a.aux < b.aux
}

// winTimerHeap is a binary min-heap of timers. It is hand-written rather
// than container/heap so pushing does not box every timer into an interface.
type winTimerHeap []winTimer

func (h *winTimerHeap) push(t winTimer) {
	*h = append(*h, t)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

// peek returns the earliest timer; ok is false when the heap is empty.
func (h winTimerHeap) peek() (t winTimer, ok bool) {
	if len(h) == 0 {
		return winTimer{}, false
	}
	return h[0], true
}

func (h *winTimerHeap) pop() winTimer {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// winSatAdd and winSatSub saturate at the int64 limits: time bounds near
// NoWatermark/EndOfTime must not wrap around and flip a comparison.
func winSatAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	if b < 0 && a < math.MinInt64-b {
		return math.MinInt64
	}
	return a + b
}

func winSatSub(a, b int64) int64 {
	if b == math.MinInt64 {
		return winSatAdd(winSatAdd(a, math.MaxInt64), 1)
	}
	return winSatAdd(a, -b)
}

// winWatermarks is the watermark of each key group. Both event-time operators
// keep it per key group, not per instance, because it is part of each group's
// state: after a restore at another parallelism, an instance can hold groups
// that came from instances whose watermarks differed.
type winWatermarks [keygroup.Count]int64

func (w *winWatermarks) reset() {
	for i := range w {
		w[i] = NoWatermark
	}
}

// winLifecycle tracks the calls the Stateful contract orders: Open first,
// Restore only before any input, Snapshot only after Flush.
type winLifecycle struct {
	opened, closed bool
	started        bool // Process or AdvanceWatermark has been called
	unflushed      bool // input arrived since the last Flush
	restored       bool
}

func (l *winLifecycle) checkRunning(op string) error {
	switch {
	case !l.opened:
		return fmt.Errorf("%s: operator is not open", op)
	case l.closed:
		return fmt.Errorf("%s: operator is closed", op)
	}
	return nil
}

// flush checks that op may flush now and records that it did. The window
// and join operators emit nothing on Flush: their output comes from timers
// and matches.
func (l *winLifecycle) flush(op string) error {
	if err := l.checkRunning(op); err != nil {
		return err
	}
	l.unflushed = false
	return nil
}

func (l *winLifecycle) open(ctx Context) error {
	if l.opened {
		return fmt.Errorf("open: operator is already open")
	}
	if ctx.Alloc == nil {
		return fmt.Errorf("open: Context.Alloc is nil")
	}
	if ctx.KeyGroups.Start < 0 || ctx.KeyGroups.End > keygroup.Count || ctx.KeyGroups.Start > ctx.KeyGroups.End {
		return fmt.Errorf("open: invalid key group range [%d,%d)", ctx.KeyGroups.Start, ctx.KeyGroups.End)
	}
	l.opened = true
	return nil
}

func (l *winLifecycle) checkRestore() error {
	if err := l.checkRunning("restore"); err != nil {
		return err
	}
	if l.started {
		return fmt.Errorf("restore: called after input or watermarks; it must come right after Open")
	}
	if l.restored {
		return fmt.Errorf("restore: called twice")
	}
	return nil
}

func (l *winLifecycle) checkSnapshot() error {
	if err := l.checkRunning("snapshot"); err != nil {
		return err
	}
	if l.unflushed {
		return fmt.Errorf("snapshot: Flush was not called after the last input")
	}
	return nil
}

// winStatePart is one restored key group's batch, read as int64 columns.
type winStatePart struct {
	kg   int
	rows int
	cols [][]int64
}

// winReadParts checks the parts handed to Restore and reads their columns:
// every key group must be owned by this instance and appear once, and every
// batch must have the state schema and no nulls.
func winReadParts(parts []KeyGroupState, schema *arrow.Schema, owned keygroup.Range) ([]winStatePart, error) {
	seen := make(map[int]bool, len(parts))
	out := make([]winStatePart, 0, len(parts))
	for _, p := range parts {
		if !owned.Contains(p.KeyGroup) {
			return nil, fmt.Errorf("restore: key group %d is outside this instance's key groups [%d,%d)",
				p.KeyGroup, owned.Start, owned.End)
		}
		if seen[p.KeyGroup] {
			return nil, fmt.Errorf("restore: key group %d appears twice", p.KeyGroup)
		}
		seen[p.KeyGroup] = true
		if p.Batch == nil {
			return nil, fmt.Errorf("restore: key group %d has no batch", p.KeyGroup)
		}
		if !p.Batch.Schema().Equal(schema) {
			return nil, fmt.Errorf("restore: key group %d has schema %s, want %s",
				p.KeyGroup, winSchemaString(p.Batch.Schema()), winSchemaString(schema))
		}
		if p.Batch.NumRows() == 0 {
			return nil, fmt.Errorf("restore: key group %d has an empty batch; snapshots hold only non-empty groups", p.KeyGroup)
		}
		sp := winStatePart{kg: p.KeyGroup, rows: int(p.Batch.NumRows()), cols: make([][]int64, schema.NumFields())}
		for i, f := range schema.Fields() {
			vals, err := winInt64Values(p.Batch, i, f.Name)
			if err != nil {
				return nil, fmt.Errorf("restore: key group %d: %w", p.KeyGroup, err)
			}
			sp.cols[i] = vals
		}
		out = append(out, sp)
	}
	return out, nil
}

// winPartWatermark returns the single watermark value of a part's watermark
// column; a part whose rows disagree is corrupt.
func winPartWatermark(p winStatePart, col int) (int64, error) {
	wms := p.cols[col]
	for _, w := range wms {
		if w != wms[0] {
			return 0, fmt.Errorf("restore: key group %d: rows carry different watermarks (%d and %d)", p.kg, wms[0], w)
		}
	}
	return wms[0], nil
}

// winRestoreWatermarks sets the watermark of every owned key group after a
// restore: restored groups take their own; groups without a part (they held
// nothing) take the smallest restored watermark, which never drops a row as
// late that the group's previous owner would still have accepted. With no
// part at all the watermark stays unknown (NoWatermark) until the next
// AdvanceWatermark: a snapshot holds only non-empty groups, so an instance
// with nothing pending has nowhere to record it.
func winRestoreWatermarks(w *winWatermarks, restored map[int]int64, owned keygroup.Range) {
	if len(restored) == 0 {
		return
	}
	low := EndOfTime
	for _, v := range restored {
		low = min(low, v)
	}
	for kg := owned.Start; kg < owned.End; kg++ {
		if v, ok := restored[kg]; ok {
			w[kg] = v
		} else {
			w[kg] = low
		}
	}
}
