package operator

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// WindowSpec configures NewWindowAgg. All columns are int64.
type WindowSpec struct {
	KeyColumn  string // grouping key
	TimeColumn string // event time in milliseconds
	SumColumn  string // summed per key and window
	Size       int64  // tumbling window length in milliseconds, > 0
}

// Output and state column names of the window aggregation.
const (
	winColKey   = "key"
	winColStart = "window_start"
	winColCount = "count"
	winColSum   = "sum"
)

// NewWindowAgg returns a keyed tumbling-window aggregation: per key and
// window [start, start+Size) of event time, with start = floor(ts/Size)*Size,
// it counts the rows and sums SumColumn.
//
// Output rows are key, window_start, count, sum, _version (always 0). A
// window fires, emitting one row, when AdvanceWatermark reaches its end
// (wm >= start+Size); windows that fire together are emitted in order of
// window end, then key. Process and Flush emit nothing.
//
// Late rows: a row whose window has already fired (start+Size <= the
// watermark) is dropped and counted in LateRows. A row below the watermark
// whose window is still open is counted in: being behind the watermark is not
// enough to lose data that can still be aggregated.
//
// State is kept per key group: the open windows and the group's watermark,
// which is saved with them so a restored instance agrees on what is late.
// Only groups with open windows are snapshotted; an instance restored from no
// part at all learns the watermark from its next AdvanceWatermark.
// The returned operator implements LateCounter.
func NewWindowAgg(in *arrow.Schema, spec WindowSpec) (Stateful, error) {
	if spec.Size <= 0 {
		return nil, fmt.Errorf("window: size must be positive, got %dms", spec.Size)
	}
	o := &winAgg{spec: spec}
	var err error
	if o.keyIdx, err = winInt64Column(in, spec.KeyColumn, "window: key"); err != nil {
		return nil, err
	}
	if o.tsIdx, err = winInt64Column(in, spec.TimeColumn, "window: time"); err != nil {
		return nil, err
	}
	if o.sumIdx, err = winInt64Column(in, spec.SumColumn, "window: sum"); err != nil {
		return nil, err
	}
	o.outSchema = winInt64Schema(winColKey, winColStart, winColCount, winColSum, winVersionColumn)
	o.stateSchema = winInt64Schema(winColKey, winColStart, winColCount, winColSum, winWatermarkColumn)
	o.out = newWinColumns(o.outSchema)
	o.wm.reset()
	return o, nil
}

// Column indexes of the window state schema.
const (
	winStKey = iota
	winStStart
	winStCount
	winStSum
	winStWatermark
)

// winSlot names one window of one key.
type winSlot struct{ key, start int64 }

// winAcc is a window's running aggregate.
type winAcc struct{ count, sum int64 }

// winGroup is the state of one key group: open windows and one timer per
// open window, due at the window's end.
type winGroup struct {
	accs   map[winSlot]winAcc
	timers winTimerHeap
}

// winFired is a window taken out of state to be emitted or snapshotted.
type winFired struct {
	end, key, start int64
	acc             winAcc
}

func winFiredCmp(a, b winFired) int {
	return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.key, b.key), cmp.Compare(a.start, b.start))
}

type winAgg struct {
	spec                  WindowSpec
	keyIdx, tsIdx, sumIdx int
	outSchema             *arrow.Schema
	stateSchema           *arrow.Schema

	ctx    Context
	life   winLifecycle
	groups [keygroup.Count]*winGroup
	wm     winWatermarks
	late   int64

	out     winColumns // output scratch
	scratch []winFired // reused while firing and snapshotting
	marks   groupMarks // groups changed since the last acknowledged snapshot
}

var (
	_ ChangeSnapshotter = (*winAgg)(nil)
	_ LateCounter       = (*winAgg)(nil)
)

// winStart is floor(ts/size)*size. The first window is cut short at the
// int64 minimum rather than wrapping.
func winStart(ts, size int64) int64 {
	q := ts / size
	if ts%size != 0 && ts < 0 {
		q--
	}
	if q < math.MinInt64/size {
		return math.MinInt64
	}
	return q * size
}

// winEnd is the end of the window starting at start: the next window's
// start, saturated at EndOfTime. Only the first window, cut at MinInt64, is
// not aligned; it ends where the first aligned window begins.
func winEnd(start, size int64) int64 {
	if r := start % size; r != 0 {
		return start - r
	}
	return winSatAdd(start, size)
}

func (o *winAgg) OutputSchema() *arrow.Schema { return o.outSchema }
func (o *winAgg) StateSchema() *arrow.Schema  { return o.stateSchema }

// LateRows is the number of rows dropped because their window had fired.
func (o *winAgg) LateRows() int64 { return o.late }

func (o *winAgg) Open(ctx Context) error {
	if err := o.life.open(ctx); err != nil {
		return fmt.Errorf("window: %w", err)
	}
	o.ctx = ctx
	o.marks.reset()
	return nil
}

func (o *winAgg) group(kg int) *winGroup {
	g := o.groups[kg]
	if g == nil {
		g = &winGroup{accs: make(map[winSlot]winAcc)}
		o.groups[kg] = g
	}
	return g
}

func (o *winAgg) Process(port int, batch arrow.RecordBatch, out Emitter) error {
	if err := o.life.checkRunning("window: process"); err != nil {
		return err
	}
	if port != 0 {
		return fmt.Errorf("window: input port %d does not exist (single input)", port)
	}
	o.life.started, o.life.unflushed = true, true
	keys, err := winInt64Values(batch, o.keyIdx, o.spec.KeyColumn)
	if err != nil {
		return fmt.Errorf("window: %w", err)
	}
	tss, err := winInt64Values(batch, o.tsIdx, o.spec.TimeColumn)
	if err != nil {
		return fmt.Errorf("window: %w", err)
	}
	vals, err := winInt64Values(batch, o.sumIdx, o.spec.SumColumn)
	if err != nil {
		return fmt.Errorf("window: %w", err)
	}
	size := o.spec.Size
	for i, k := range keys {
		kg := keygroup.Of(k)
		if !o.ctx.KeyGroups.Contains(kg) {
			return fmt.Errorf("window: key %d is in key group %d, outside this instance's key groups [%d,%d)",
				k, kg, o.ctx.KeyGroups.Start, o.ctx.KeyGroups.End)
		}
		start := winStart(tss[i], size)
		end := winEnd(start, size)
		if end <= o.wm[kg] {
			o.late++ // the window already fired; counting the row in would change a published result
			continue
		}
		g := o.group(kg)
		o.marks.mark(kg)
		slot := winSlot{k, start}
		acc, ok := g.accs[slot]
		if !ok {
			g.timers.push(winTimer{at: end, key: k, aux: start})
		}
		sum, exact := AddInt64(acc.sum, vals[i])
		if !exact {
			return fmt.Errorf("window: key %d, window starting at %d: sum %d + %d is outside the int64 range: %w", k, start, acc.sum, vals[i], ErrSumOverflow)
		}
		acc.count++
		acc.sum = sum
		g.accs[slot] = acc
	}
	return nil
}

// AdvanceWatermark fires every window whose end is at or before wm.
func (o *winAgg) AdvanceWatermark(wm int64, out Emitter) error {
	if err := o.life.checkRunning("window: advance watermark"); err != nil {
		return err
	}
	o.life.started = true
	fired := o.scratch[:0]
	r := o.ctx.KeyGroups
	for kg := r.Start; kg < r.End; kg++ {
		if wm <= o.wm[kg] {
			continue
		}
		o.wm[kg] = wm
		g := o.groups[kg]
		if g == nil {
			continue
		}
		for {
			t, ok := g.timers.peek()
			if !ok || t.at > wm {
				break
			}
			g.timers.pop()
			o.marks.mark(kg)
			slot := winSlot{t.key, t.aux}
			fired = append(fired, winFired{end: t.at, key: t.key, start: t.aux, acc: g.accs[slot]})
			delete(g.accs, slot)
		}
		if len(g.accs) == 0 {
			o.groups[kg] = nil // let the map go; an idle group costs nothing
		}
	}
	// Timers pop in order within a group; the global order needs one sort.
	slices.SortFunc(fired, winFiredCmp)
	for _, f := range fired {
		o.out.cols[0] = append(o.out.cols[0], f.key)
		o.out.cols[1] = append(o.out.cols[1], f.start)
		o.out.cols[2] = append(o.out.cols[2], f.acc.count)
		o.out.cols[3] = append(o.out.cols[3], f.acc.sum)
		o.out.cols[4] = append(o.out.cols[4], 0)
	}
	o.scratch = fired[:0]
	if err := o.out.emit(o.ctx.Alloc, out); err != nil {
		return fmt.Errorf("window: emit: %w", err)
	}
	return nil
}

// Flush emits nothing: windows are emitted only when they fire.
func (o *winAgg) Flush(out Emitter) error {
	return o.life.flush("window: flush")
}

// Snapshot returns one batch per key group with open windows, rows ordered
// by window end, then key; every row carries the group's watermark.
func (o *winAgg) Snapshot() ([]KeyGroupState, error) {
	if err := o.life.checkSnapshot(); err != nil {
		return nil, fmt.Errorf("window: %w", err)
	}
	return o.snapshotGroups(func(int) bool { return true }), nil
}

// SnapshotChanges hands over the groups changed since the last
// acknowledged snapshot whole: a watermark rewrites every window's
// position in its group's order, so entries would save little.
func (o *winAgg) SnapshotChanges() (StateChanges, error) {
	if err := o.life.checkSnapshot(); err != nil {
		return StateChanges{}, fmt.Errorf("window: %w", err)
	}
	seq, dirty := o.marks.take()
	return wholeGroupChanges(seq, o.stateSchema, o.ctx.Alloc, o.ctx.KeyGroups, dirty, o.snapshotGroups(dirty)), nil
}

// AckChanges forgets the changes snapshot seq held.
func (o *winAgg) AckChanges(seq uint64) { o.marks.ack(seq) }

func (o *winAgg) snapshotGroups(want func(kg int) bool) []KeyGroupState {
	st := newWinColumns(o.stateSchema)
	var parts []KeyGroupState
	r := o.ctx.KeyGroups
	for kg := r.Start; kg < r.End; kg++ {
		g := o.groups[kg]
		if g == nil || len(g.accs) == 0 || !want(kg) {
			continue
		}
		rows := o.scratch[:0]
		for slot, acc := range g.accs {
			rows = append(rows, winFired{end: winEnd(slot.start, o.spec.Size), key: slot.key, start: slot.start, acc: acc})
		}
		slices.SortFunc(rows, winFiredCmp)
		for _, f := range rows {
			st.cols[winStKey] = append(st.cols[winStKey], f.key)
			st.cols[winStStart] = append(st.cols[winStStart], f.start)
			st.cols[winStCount] = append(st.cols[winStCount], f.acc.count)
			st.cols[winStSum] = append(st.cols[winStSum], f.acc.sum)
			st.cols[winStWatermark] = append(st.cols[winStWatermark], o.wm[kg])
		}
		o.scratch = rows[:0]
		parts = append(parts, KeyGroupState{KeyGroup: kg, Batch: st.batch(o.ctx.Alloc, 0, st.len())})
		st.reset()
	}
	return parts
}

// Restore loads open windows and watermarks. It rejects, rather than skips,
// anything inconsistent: a group this instance does not own, a key that
// does not belong to its group, a window listed twice or one that should
// already have fired.
func (o *winAgg) Restore(parts []KeyGroupState) error {
	if err := o.life.checkRestore(); err != nil {
		return fmt.Errorf("window: %w", err)
	}
	read, err := winReadParts(parts, o.stateSchema, o.ctx.KeyGroups)
	if err != nil {
		return fmt.Errorf("window: %w", err)
	}
	groups := make(map[int]*winGroup, len(read))
	wms := make(map[int]int64, len(read))
	for _, p := range read {
		wm, err := winPartWatermark(p, winStWatermark)
		if err != nil {
			return fmt.Errorf("window: %w", err)
		}
		wms[p.kg] = wm
		c := p.cols
		g := &winGroup{accs: make(map[winSlot]winAcc, p.rows)}
		for i := range p.rows {
			k, start, n := c[winStKey][i], c[winStStart][i], c[winStCount][i]
			if kg := keygroup.Of(k); kg != p.kg {
				return fmt.Errorf("window: restore: key %d belongs to key group %d, found in group %d", k, kg, p.kg)
			}
			if n <= 0 {
				return fmt.Errorf("window: restore: key group %d: window (key %d, start %d) has count %d", p.kg, k, start, n)
			}
			if winStart(start, o.spec.Size) != start {
				return fmt.Errorf("window: restore: key group %d: %d is not a window start for size %d", p.kg, start, o.spec.Size)
			}
			end := winEnd(start, o.spec.Size)
			if end <= wm {
				return fmt.Errorf("window: restore: key group %d: window (key %d, start %d) should have fired at watermark %d", p.kg, k, start, wm)
			}
			slot := winSlot{k, start}
			if _, dup := g.accs[slot]; dup {
				return fmt.Errorf("window: restore: key group %d: window (key %d, start %d) appears twice", p.kg, k, start)
			}
			g.accs[slot] = winAcc{count: n, sum: c[winStSum][i]}
			g.timers.push(winTimer{at: end, key: k, aux: start})
		}
		groups[p.kg] = g
	}
	for kg, g := range groups {
		o.groups[kg] = g
	}
	winRestoreWatermarks(&o.wm, wms, o.ctx.KeyGroups)
	o.life.restored = true
	o.marks.reset() // what Restore loads is durable
	return nil
}

// Close drops the state. The window holds no Arrow memory between calls.
func (o *winAgg) Close() error {
	o.life.closed = true
	o.groups = [keygroup.Count]*winGroup{}
	o.scratch = nil
	return nil
}
