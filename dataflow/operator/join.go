package operator

import (
	"fmt"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// JoinSpec configures NewIntervalJoin. The column names apply to both
// inputs; all columns are int64.
type JoinSpec struct {
	KeyColumn   string // join key
	TimeColumn  string // event time in milliseconds
	IDColumn    string // row identity, copied to order_id / payment_id
	ValueColumn string // copied to amount / paid
	Within      int64  // max |left.ts - right.ts| in milliseconds, >= 0
}

// Input ports of the interval join.
const (
	JoinLeft  = 0 // orders
	JoinRight = 1 // payments
)

// Column indexes of the join state schema.
const (
	joinStSide = iota
	joinStKey
	joinStID
	joinStValue
	joinStTS
	joinStWatermark
)

// NewIntervalJoin returns a symmetric inner interval join of left (port 0,
// orders) and right (port 1, payments) on key, matching rows with
// |left.ts - right.ts| <= Within.
//
// Output rows are key, order_id, payment_id, amount, paid, _version (always
// 0): the left row's id and value, the right row's id and value. A row
// arriving on one side is probed against the rows buffered for the other side
// under the same key, every match is emitted at once, and then the row is
// buffered itself; so each matching pair is emitted exactly once, by whichever
// row arrives second. Within one Process call rows are emitted in input row
// order, then in buffered order (event time, then arrival).
//
// Pruning: AdvanceWatermark(wm) drops a buffered row r once r.ts+Within < wm,
// since every later on-time row has ts >= wm and is too far away.
//
// Late rows: a row is late when its ts is below the watermark of its key
// group (ts < wm). That is exactly the set of rows that could have matched a
// row already pruned (a pruned row has ts < wm'-Within for some wm' <= wm, and
// matching it needs ts <= its ts+Within < wm). A late row is still joined with
// what is buffered and counted in LateRows; it is buffered only if it could
// still match a future on-time row (ts+Within >= wm). On-time input, i.e.
// input that keeps the watermark's promise, therefore yields exactly the
// relational join whatever the arrival order and batch boundaries.
//
// State is kept per key group: both sides' buffered rows and the group's
// watermark. The returned operator implements LateCounter.
func NewIntervalJoin(left, right *arrow.Schema, spec JoinSpec) (Stateful, error) {
	if spec.Within < 0 {
		return nil, fmt.Errorf("join: within must not be negative, got %dms", spec.Within)
	}
	o := &joinOp{spec: spec}
	for side, s := range []*arrow.Schema{left, right} {
		name := [2]string{"left (orders)", "right (payments)"}[side]
		cols := &o.cols[side]
		var err error
		if cols.key, err = winInt64Column(s, spec.KeyColumn, "join: "+name+" key"); err != nil {
			return nil, err
		}
		if cols.ts, err = winInt64Column(s, spec.TimeColumn, "join: "+name+" time"); err != nil {
			return nil, err
		}
		if cols.id, err = winInt64Column(s, spec.IDColumn, "join: "+name+" id"); err != nil {
			return nil, err
		}
		if cols.value, err = winInt64Column(s, spec.ValueColumn, "join: "+name+" value"); err != nil {
			return nil, err
		}
	}
	o.outSchema = winInt64Schema("key", "order_id", "payment_id", "amount", "paid", winVersionColumn)
	o.stateSchema = winInt64Schema("side", "key", "id", "value", "ts", winWatermarkColumn)
	o.out = newWinColumns(o.outSchema)
	o.wm.reset()
	return o, nil
}

// joinRow is one buffered input row.
type joinRow struct{ ts, id, value int64 }

// joinKeyBuf holds the buffered rows of one key, per side, each sorted by
// ts (ties in arrival order), so a probe is a binary search for the range
// [ts-Within, ts+Within] and pruning cuts a prefix.
type joinKeyBuf struct{ side [2][]joinRow }

// minTS is the smallest buffered ts of the key; ok is false when empty.
func (b *joinKeyBuf) minTS() (ts int64, ok bool) {
	for _, rows := range b.side {
		if len(rows) > 0 && (!ok || rows[0].ts < ts) {
			ts, ok = rows[0].ts, true
		}
	}
	return ts, ok
}

// joinGroup is the state of one key group. timers holds, for every key, an
// entry due at the key's smallest buffered ts (plus stale entries, skipped
// when popped), so pruning visits only keys that have something to drop.
type joinGroup struct {
	keys   map[int64]*joinKeyBuf
	timers winTimerHeap
}

type joinCols struct{ key, ts, id, value int }

type joinOp struct {
	spec        JoinSpec
	cols        [2]joinCols
	outSchema   *arrow.Schema
	stateSchema *arrow.Schema

	ctx    Context
	life   winLifecycle
	groups [keygroup.Count]*joinGroup
	wm     winWatermarks
	late   int64

	out   winColumns
	marks groupMarks // groups changed since the last acknowledged snapshot
}

var (
	_ ChangeSnapshotter = (*joinOp)(nil)
	_ LateCounter       = (*joinOp)(nil)
)

func (o *joinOp) OutputSchema() *arrow.Schema { return o.outSchema }
func (o *joinOp) StateSchema() *arrow.Schema  { return o.stateSchema }

// LateRows is the number of rows that arrived below their key group's
// watermark. They are joined with what is still buffered, but may have
// missed matches that were already pruned.
func (o *joinOp) LateRows() int64 { return o.late }

func (o *joinOp) Open(ctx Context) error {
	if err := o.life.open(ctx); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	o.ctx = ctx
	o.marks.reset()
	return nil
}

func (o *joinOp) Process(port int, batch arrow.RecordBatch, out Emitter) error {
	if err := o.life.checkRunning("join: process"); err != nil {
		return err
	}
	if port != JoinLeft && port != JoinRight {
		return fmt.Errorf("join: input port %d does not exist (0 = orders, 1 = payments)", port)
	}
	o.life.started, o.life.unflushed = true, true
	o.out.reset() // nothing left over from a call that failed half-way
	c := o.cols[port]
	var vals [4][]int64
	for i, col := range [4]struct {
		idx  int
		name string
	}{{c.key, o.spec.KeyColumn}, {c.ts, o.spec.TimeColumn}, {c.id, o.spec.IDColumn}, {c.value, o.spec.ValueColumn}} {
		v, err := winInt64Values(batch, col.idx, col.name)
		if err != nil {
			return fmt.Errorf("join: port %d: %w", port, err)
		}
		vals[i] = v
	}
	keys, tss, ids, values := vals[0], vals[1], vals[2], vals[3]
	within := o.spec.Within
	other := 1 - port
	for i, k := range keys {
		kg := keygroup.Of(k)
		if !o.ctx.KeyGroups.Contains(kg) {
			return fmt.Errorf("join: key %d is in key group %d, outside this instance's key groups [%d,%d)",
				k, kg, o.ctx.KeyGroups.Start, o.ctx.KeyGroups.End)
		}
		row := joinRow{ts: tss[i], id: ids[i], value: values[i]}
		wm := o.wm[kg]
		if row.ts < wm {
			o.late++
		}
		g := o.groups[kg]
		var buf *joinKeyBuf
		if g != nil {
			buf = g.keys[k]
		}
		if buf != nil {
			o.probe(k, port, row, buf.side[other])
		}
		// A row that no on-time row can match any more is not kept: the next
		// watermark would prune it anyway.
		if row.ts < winSatSub(wm, within) {
			continue
		}
		if g == nil {
			g = &joinGroup{keys: make(map[int64]*joinKeyBuf)}
			o.groups[kg] = g
		}
		if buf == nil {
			buf = &joinKeyBuf{}
			g.keys[k] = buf
		}
		o.marks.mark(kg)
		oldMin, had := buf.minTS()
		rows := buf.side[port]
		pos := sort.Search(len(rows), func(j int) bool { return rows[j].ts > row.ts })
		buf.side[port] = slices.Insert(rows, pos, row)
		if !had || row.ts < oldMin {
			g.timers.push(winTimer{at: row.ts, key: k})
		}
	}
	if err := o.out.emit(o.ctx.Alloc, out); err != nil {
		return fmt.Errorf("join: emit: %w", err)
	}
	return nil
}

// probe appends the matches of row (arrived on port) among rows, the other
// side's buffer of the same key, to the output.
func (o *joinOp) probe(key int64, port int, row joinRow, rows []joinRow) {
	lo, hi := winSatSub(row.ts, o.spec.Within), winSatAdd(row.ts, o.spec.Within)
	from := sort.Search(len(rows), func(j int) bool { return rows[j].ts >= lo })
	for _, b := range rows[from:] {
		if b.ts > hi {
			break
		}
		l, r := row, b
		if port == JoinRight {
			l, r = b, row
		}
		o.out.cols[0] = append(o.out.cols[0], key)
		o.out.cols[1] = append(o.out.cols[1], l.id)
		o.out.cols[2] = append(o.out.cols[2], r.id)
		o.out.cols[3] = append(o.out.cols[3], l.value)
		o.out.cols[4] = append(o.out.cols[4], r.value)
		o.out.cols[5] = append(o.out.cols[5], 0)
	}
}

// AdvanceWatermark prunes buffered rows with ts+Within < wm. It emits nothing.
func (o *joinOp) AdvanceWatermark(wm int64, out Emitter) error {
	if err := o.life.checkRunning("join: advance watermark"); err != nil {
		return err
	}
	o.life.started = true
	below := winSatSub(wm, o.spec.Within) // rows with ts < below go
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
			if !ok || t.at >= below {
				break
			}
			g.timers.pop()
			buf := g.keys[t.key]
			if buf == nil {
				continue // stale: the key was emptied earlier
			}
			if m, _ := buf.minTS(); m != t.at {
				continue // stale: the key's smallest ts changed and has its own entry
			}
			o.marks.mark(kg)
			for s, rows := range buf.side {
				n := sort.Search(len(rows), func(j int) bool { return rows[j].ts >= below })
				buf.side[s] = rows[n:]
				if len(buf.side[s]) == 0 {
					buf.side[s] = nil
				}
			}
			if m, ok := buf.minTS(); ok {
				g.timers.push(winTimer{at: m, key: t.key})
			} else {
				delete(g.keys, t.key)
			}
		}
		if len(g.keys) == 0 {
			o.groups[kg] = nil
		}
	}
	return nil
}

// Flush emits nothing: matches are emitted as soon as they are found.
func (o *joinOp) Flush(out Emitter) error {
	return o.life.flush("join: flush")
}

// Snapshot returns one batch per key group with buffered rows: keys
// ascending, per key the left rows then the right rows in buffered order;
// every row carries the group's watermark.
func (o *joinOp) Snapshot() ([]KeyGroupState, error) {
	if err := o.life.checkSnapshot(); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	return o.snapshotGroups(func(int) bool { return true }), nil
}

// SnapshotChanges hands over the groups changed since the last
// acknowledged snapshot whole (pruning shifts every later row).
func (o *joinOp) SnapshotChanges() (StateChanges, error) {
	if err := o.life.checkSnapshot(); err != nil {
		return StateChanges{}, fmt.Errorf("join: %w", err)
	}
	seq, dirty := o.marks.take()
	return wholeGroupChanges(seq, o.stateSchema, o.ctx.Alloc, o.ctx.KeyGroups, dirty, o.snapshotGroups(dirty)), nil
}

// AckChanges forgets the changes snapshot seq held.
func (o *joinOp) AckChanges(seq uint64) { o.marks.ack(seq) }

func (o *joinOp) snapshotGroups(want func(kg int) bool) []KeyGroupState {
	st := newWinColumns(o.stateSchema)
	var parts []KeyGroupState
	var keys []int64
	r := o.ctx.KeyGroups
	for kg := r.Start; kg < r.End; kg++ {
		g := o.groups[kg]
		if g == nil || len(g.keys) == 0 || !want(kg) {
			continue
		}
		keys = keys[:0]
		for k := range g.keys {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for side, rows := range g.keys[k].side {
				for _, row := range rows {
					st.cols[joinStSide] = append(st.cols[joinStSide], int64(side))
					st.cols[joinStKey] = append(st.cols[joinStKey], k)
					st.cols[joinStID] = append(st.cols[joinStID], row.id)
					st.cols[joinStValue] = append(st.cols[joinStValue], row.value)
					st.cols[joinStTS] = append(st.cols[joinStTS], row.ts)
					st.cols[joinStWatermark] = append(st.cols[joinStWatermark], o.wm[kg])
				}
			}
		}
		parts = append(parts, KeyGroupState{KeyGroup: kg, Batch: st.batch(o.ctx.Alloc, 0, st.len())})
		st.reset()
	}
	return parts
}

// Restore loads buffered rows and watermarks. It rejects anything
// inconsistent: a group this instance does not own, a key outside its
// group, an unknown side, rows out of ts order, or a row the group's
// watermark should already have pruned.
func (o *joinOp) Restore(parts []KeyGroupState) error {
	if err := o.life.checkRestore(); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	read, err := winReadParts(parts, o.stateSchema, o.ctx.KeyGroups)
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	groups := make(map[int]*joinGroup, len(read))
	wms := make(map[int]int64, len(read))
	for _, p := range read {
		wm, err := winPartWatermark(p, joinStWatermark)
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		wms[p.kg] = wm
		c := p.cols
		below := winSatSub(wm, o.spec.Within)
		g := &joinGroup{keys: make(map[int64]*joinKeyBuf)}
		for i := range p.rows {
			side, k, ts := c[joinStSide][i], c[joinStKey][i], c[joinStTS][i]
			if side != JoinLeft && side != JoinRight {
				return fmt.Errorf("join: restore: key group %d: row %d has side %d", p.kg, i, side)
			}
			if kg := keygroup.Of(k); kg != p.kg {
				return fmt.Errorf("join: restore: key %d belongs to key group %d, found in group %d", k, kg, p.kg)
			}
			if ts < below {
				return fmt.Errorf("join: restore: key group %d: row with ts %d should have been pruned at watermark %d", p.kg, ts, wm)
			}
			buf := g.keys[k]
			if buf == nil {
				buf = &joinKeyBuf{}
				g.keys[k] = buf
			}
			rows := buf.side[side]
			if n := len(rows); n > 0 && rows[n-1].ts > ts {
				return fmt.Errorf("join: restore: key group %d: key %d side %d rows are not in ts order", p.kg, k, side)
			}
			buf.side[side] = append(rows, joinRow{ts: ts, id: c[joinStID][i], value: c[joinStValue][i]})
		}
		for k, buf := range g.keys {
			m, _ := buf.minTS()
			g.timers.push(winTimer{at: m, key: k})
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

// Close drops the state. The join holds no Arrow memory between calls.
func (o *joinOp) Close() error {
	o.life.closed = true
	o.groups = [keygroup.Count]*joinGroup{}
	return nil
}
