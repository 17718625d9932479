package operator

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// KeyedAggSpec configures NewKeyedAgg: per value of KeyColumn, the number of
// rows and the sum of SumColumn.
type KeyedAggSpec struct {
	KeyColumn, SumColumn string
}

// kaggVersionColumn equals sink.VersionColumn (a test checks it); the
// operator package does not import sink so that sinks may use operators.
const kaggVersionColumn = "_version"

// kaggFlushRows caps the rows of one emitted batch so a Flush after a large
// unit of input does not produce one huge batch downstream.
const kaggFlushRows = 1 << 16

var (
	kaggOutSchema = arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
		{Name: kaggVersionColumn, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	kaggStateSchema = arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
)

// keyedAgg keeps count and sum per key, one hash table per key group.
type keyedAgg struct {
	keyCol, sumCol int
	alloc          memory.Allocator
	owned          keygroup.Range
	// snapBufs recycles the memory of Snapshot's batches once released.
	snapBufs *snapBuffers
	// tables[kg] is nil for key groups this instance does not own.
	tables [keygroup.Count]*kaggTable
	// slots[kg] is tables[kg].slots, kept beside it so the hot loop reaches
	// a key group's slots with one load instead of two dependent ones. It
	// is empty exactly for key groups not owned, so its length doubles as
	// the ownership check. syncSlots refreshes it after tables grow.
	slots [keygroup.Count][]kaggEntry
	// changed lists the keys changed since the last Flush, in order of
	// first change. Only changed[:nChanged] is meaningful; the slice is kept
	// long enough for a whole batch so the hot loop appends without a
	// branch. epoch counts Flush calls (see kaggTable.grownIn).
	changed  []kaggChange
	nChanged int
	epoch    uint64
	// predictable selects processFast's copy for the next batch.
	predictable bool
	// overflowed: processFast stopped at a row whose value would take its
	// key's sum past int64 (the row it stopped at, unapplied).
	overflowed bool
	// track records the keys changed since the last acknowledged snapshot
	// (keyedagg_changes.go).
	track kaggTrack
}

// kaggChange locates a changed key. Flush reads the entry straight from
// (kg, slot), an independent load per key, unless the table was rehashed in
// this epoch; then it looks the key up again.
type kaggChange struct {
	key  int64
	kg   uint32
	slot uint32
}

// NewKeyedAgg returns the keyed aggregation: per key, the number of rows and
// the sum of spec.SumColumn. Process only updates state; Flush emits one row
// (key, count, sum, _version) per key changed since the previous Flush, in
// order of first change, where _version is the key's running count. Its
// state is (key, count, sum) per key group.
func NewKeyedAgg(in *arrow.Schema, spec KeyedAggSpec) (Stateful, error) {
	k, err := Int64ColumnIndex(in, spec.KeyColumn)
	if err != nil {
		return nil, fmt.Errorf("keyed aggregation key: %w", err)
	}
	s, err := Int64ColumnIndex(in, spec.SumColumn)
	if err != nil {
		return nil, fmt.Errorf("keyed aggregation sum: %w", err)
	}
	return &keyedAgg{keyCol: k, sumCol: s, alloc: memory.DefaultAllocator, epoch: 1}, nil
}

func (a *keyedAgg) OutputSchema() *arrow.Schema { return kaggOutSchema }
func (a *keyedAgg) StateSchema() *arrow.Schema  { return kaggStateSchema }

func (a *keyedAgg) Open(ctx Context) error {
	r := ctx.KeyGroups
	if r.Start < 0 || r.End > keygroup.Count || r.Start > r.End {
		return fmt.Errorf("keyed aggregation: invalid key-group range [%d,%d)", r.Start, r.End)
	}
	a.alloc = helpAlloc(ctx.Alloc)
	if a.snapBufs != nil {
		a.snapBufs.close()
	}
	a.snapBufs = newSnapBuffers(a.alloc)
	a.owned = r
	a.freeTables()
	for kg := r.Start; kg < r.End; kg++ {
		// Never without slots, so the hot loop need not check for it.
		t := &kaggTable{}
		t.grow(kaggMinSlots, a.epoch)
		t.grownIn = 0 // empty: no slot index to invalidate
		a.tables[kg] = t
	}
	a.syncSlots()
	a.track.reset()
	return nil
}

// freeTables returns the memory of every table and forgets them.
func (a *keyedAgg) freeTables() {
	for kg, t := range a.tables {
		if t != nil {
			t.free()
		}
		a.tables[kg] = nil
	}
	a.slots = [keygroup.Count][]kaggEntry{}
}

// syncSlots copies every table's slots into a.slots; call it after tables
// grew (or were replaced).
func (a *keyedAgg) syncSlots() {
	for kg, t := range a.tables {
		a.slots[kg] = nil
		if t != nil {
			a.slots[kg] = t.slots
		}
	}
}

func (a *keyedAgg) Process(port int, batch arrow.RecordBatch, _ Emitter) error {
	if port != 0 {
		return fmt.Errorf("keyed aggregation: input port %d does not exist", port)
	}
	keyArr, err := helpInt64Col(batch, a.keyCol)
	if err != nil {
		return fmt.Errorf("keyed aggregation: %w", err)
	}
	sumArr, err := helpInt64Col(batch, a.sumCol)
	if err != nil {
		return fmt.Errorf("keyed aggregation: %w", err)
	}
	if keyArr.NullN() > 0 {
		return fmt.Errorf("keyed aggregation: key column %q has %d null values",
			batch.ColumnName(a.keyCol), keyArr.NullN())
	}
	keys := keyArr.Int64Values()
	if len(keys) == 0 {
		return nil
	}
	// Room for every row to be a first change, so appending needs no check.
	if need := a.nChanged + len(keys); need > len(a.changed) {
		grown := make([]kaggChange, max(need, 2*len(a.changed)))
		copy(grown, a.changed[:a.nChanged])
		a.changed = grown
	}
	if sumArr.NullN() > 0 {
		return a.processNullableSums(keys, sumArr)
	}
	return a.process(keys, sumArr.Int64Values())
}

// process updates the state for rows keys/vals. The hot loop stops at any
// row that needs its table to grow first (or whose key group is not
// owned); that rare work happens here, outside it.
func (a *keyedAgg) process(keys, vals []int64) error {
	vals = vals[:len(keys)]
	for {
		done := a.processFast(keys, vals)
		keys, vals = keys[done:], vals[done:]
		if a.overflowed {
			return a.sumOverflow(keys[0], vals[0])
		}
		if len(keys) == 0 {
			return nil
		}
		kg := keygroup.Of(keys[0])
		t := a.tables[kg]
		if t == nil {
			return a.notOwned(keys[0])
		}
		t.grow(2*len(t.slots), a.epoch)
		a.slots[kg] = t.slots
	}
}

// processFast is the hot loop; it returns how many rows it consumed. It
// probes inline and has no calls, so the loop's values stay in registers.
// The table's fill is checked only when a key is inserted, which in the
// steady state of a job is rare.
//
// It comes in two copies that differ in how they record first changes,
// chosen from the previous batch. When nearly all rows or nearly none were
// first changes, a branch on "already dirty" predicts well and is cheapest
// (processBranchy). Otherwise that branch would mispredict often, each time
// stalling on the entry's cache miss, so processBranchFree writes the
// change unconditionally and advances the list only when the key was not
// dirty yet; that store's address depends on the previous row's entry,
// which costs 10-25% of the loop at 100k keys. Two copies rather than one
// loop with a flag: the flag's register made the compiler spill the hash
// and lose what the branch saves.
func (a *keyedAgg) processFast(keys, vals []int64) int {
	var done, nc int
	if a.predictable {
		done, nc = a.processBranchy(keys, vals)
	} else {
		done, nc = a.processBranchFree(keys, vals)
	}
	// Fewer than 1/8 or more than 7/8 first changes: the branch would
	// mispredict rarely.
	if done > 0 {
		a.predictable = 8*nc < done || 8*nc > 7*done
	}
	return done
}

// processBranchy is processFast with a branch on "already dirty"; it
// returns the rows consumed and the first changes recorded.
func (a *keyedAgg) processBranchy(keys, vals []int64) (int, int) {
	vals = vals[:len(keys)]
	changed := a.changed[a.nChanged : a.nChanged+len(keys)]
	nc := 0
	groups := &a.slots
	done := len(keys)
rows:
	for i, k := range keys {
		h := keygroup.Hash(k)
		kg := keygroup.OfHash(h)
		slots := groups[kg]
		if len(slots) == 0 { // not owned
			done = i
			break
		}
		mask := uint64(len(slots) - 1)
		x := h & mask
		for {
			e := &slots[x]
			if e.key == k && e.count != 0 {
				break
			}
			if e.count == 0 {
				t := a.tables[kg]
				if t.n >= t.growAt {
					done = i
					break rows
				}
				e.key = k
				t.n++
				break
			}
			x = (x + 1) & mask
		}
		e := &slots[x]
		c := e.count
		sum := e.sum + vals[i]
		if (e.sum^sum)&(vals[i]^sum) < 0 { // int64 overflow; a new key's 0 + v never does
			a.overflowed = true
			done = i
			break
		}
		e.sum = sum
		if c >= 0 { // not dirty yet
			changed[nc] = kaggChange{key: k, kg: uint32(kg), slot: uint32(x)}
			nc++
		}
		e.count = (c | kaggDirty) + 1
	}
	a.nChanged += nc
	return done, nc
}

// processBranchFree is processBranchy recording first changes without a
// branch. The two loops are kept as copies on purpose: one loop choosing
// by a flag made the compiler spill the hash and cost more than either.
func (a *keyedAgg) processBranchFree(keys, vals []int64) (int, int) {
	vals = vals[:len(keys)]
	changed := a.changed[a.nChanged : a.nChanged+len(keys)]
	nc := 0
	groups := &a.slots
	done := len(keys)
rows:
	for i, k := range keys {
		h := keygroup.Hash(k)
		kg := keygroup.OfHash(h)
		slots := groups[kg]
		if len(slots) == 0 { // not owned
			done = i
			break
		}
		mask := uint64(len(slots) - 1)
		x := h & mask
		for {
			e := &slots[x]
			if e.key == k && e.count != 0 {
				break
			}
			if e.count == 0 {
				t := a.tables[kg]
				if t.n >= t.growAt {
					done = i
					break rows
				}
				e.key = k
				t.n++
				break
			}
			x = (x + 1) & mask
		}
		e := &slots[x]
		c := e.count
		sum := e.sum + vals[i]
		if (e.sum^sum)&(vals[i]^sum) < 0 { // int64 overflow; a new key's 0 + v never does
			a.overflowed = true
			done = i
			break
		}
		e.sum = sum
		changed[nc] = kaggChange{key: k, kg: uint32(kg), slot: uint32(x)}
		nc += int(^uint64(c) >> 63) // 1 unless already dirty
		e.count = (c | kaggDirty) + 1
	}
	a.nChanged += nc
	return done, nc
}

// kaggB2I is compiled to a SETcc, not a branch.
func kaggB2I(b bool) int {
	var i int
	if b {
		i = 1
	}
	return i
}

// processNullableSums is the slow path for a sum column with nulls: the row
// still counts, a null adds nothing to the sum (as SQL's count(*), sum(v)).
func (a *keyedAgg) processNullableSums(keys []int64, sums *array.Int64) error {
	vals := sums.Int64Values()
	for i, k := range keys {
		h := keygroup.Hash(k)
		kg := keygroup.OfHash(h)
		t := a.tables[kg]
		if t == nil {
			return a.notOwned(k)
		}
		if t.n >= t.growAt {
			t.grow(2*len(t.slots), a.epoch)
			a.slots[kg] = t.slots
		}
		x := t.upsert(k, h)
		e := &t.slots[x]
		if e.count >= 0 { // not dirty yet
			a.changed[a.nChanged] = kaggChange{key: k, kg: uint32(kg), slot: uint32(x)}
			a.nChanged++
		}
		e.count = (e.count | kaggDirty) + 1
		if sums.IsValid(i) {
			sum, ok := AddInt64(e.sum, vals[i])
			if !ok {
				return a.sumOverflow(k, vals[i])
			}
			e.sum = sum
		}
	}
	return nil
}

// sumOverflow is the error for row (k, v) whose value would take the sum
// of key k past the int64 range. Sums are exact or the run fails: a
// wrapped sum would be a wrong result that looks like a right one.
func (a *keyedAgg) sumOverflow(k, v int64) error {
	h := keygroup.Hash(k)
	t := a.tables[keygroup.OfHash(h)]
	sum := t.slots[t.upsert(k, h)].sum
	return fmt.Errorf("keyed aggregation: key %d: sum %d + %d is outside the int64 range: %w", k, sum, v, ErrSumOverflow)
}

func (a *keyedAgg) notOwned(k int64) error {
	return fmt.Errorf("keyed aggregation: key %d is in key group %d, not owned by this instance (owns [%d,%d)); was the input hash-exchanged?",
		k, keygroup.Of(k), a.owned.Start, a.owned.End)
}

// AdvanceWatermark does nothing: the aggregation has no notion of time.
func (a *keyedAgg) AdvanceWatermark(int64, Emitter) error { return nil }

// Flush emits the changed keys in batches of at most kaggFlushRows rows.
func (a *keyedAgg) Flush(out Emitter) error {
	pending := a.changed[:a.nChanged]
	for len(pending) > 0 {
		chunk := pending[:min(len(pending), kaggFlushRows)]
		if err := a.emitChanged(chunk, out); err != nil {
			// Keep what was not emitted so the error loses nothing; the
			// executor treats a failed Flush as a failure of the worker.
			a.nChanged = copy(a.changed, pending)
			return err
		}
		pending = pending[len(chunk):]
	}
	a.nChanged = 0
	if len(a.changed) > 4*kaggFlushRows {
		a.changed = nil // do not pin the memory of one unusually large unit
	}
	a.epoch++
	return nil
}

func (a *keyedAgg) emitChanged(chunk []kaggChange, out Emitter) error {
	n := len(chunk)
	keyArr, kv := AllocInt64(a.alloc, n)
	cntArr, cv := AllocInt64(a.alloc, n)
	sumArr, sv := AllocInt64(a.alloc, n)
	kv, cv, sv = kv[:n], cv[:n], sv[:n]
	for i, c := range chunk {
		t := a.tables[c.kg]
		var e *kaggEntry
		if t.grownIn != a.epoch {
			e = &t.slots[c.slot]
		} else {
			h := keygroup.Hash(c.key)
			e = &t.slots[t.upsert(c.key, h)] // present: upsert only finds
		}
		e.count &^= kaggDirty
		if e.count&kaggPending == 0 && !a.track.full { // first change since the last SnapshotChanges
			e.count |= kaggPending
			a.listPending(kaggKey{key: c.key, kg: c.kg})
		}
		kv[i], cv[i], sv[i] = c.key, e.count&^kaggPending, e.sum
	}
	// _version is the running count: share the count column, arrays are
	// immutable once built.
	cntArr.Retain()
	b := NewBatchOwning(kaggOutSchema, n, keyArr, cntArr, sumArr, cntArr)
	defer b.Release()
	return out.Emit(b)
}

// Snapshot copies every non-empty key group into a (key, count, sum) batch,
// in slot order. It is a sequential scan of the tables, so it costs about
// as much as reading the state's memory once.
func (a *keyedAgg) Snapshot() ([]KeyGroupState, error) {
	if a.snapBufs == nil {
		return nil, errors.New("keyed aggregation: snapshot of an instance not open (before Open or after Close)")
	}
	if a.nChanged > 0 {
		return nil, fmt.Errorf("keyed aggregation: snapshot with %d changed keys not flushed; call Flush first", a.nChanged)
	}
	// Keep as much released memory as this snapshot takes: Buffer
	// rounds each column up to 64 bytes.
	keep := 0
	for kg := a.owned.Start; kg < a.owned.End; kg++ {
		if n := a.tables[kg].n; n > 0 {
			keep += 3 * (((n+1)*8 + 63) &^ 63)
		}
	}
	a.snapBufs.setKeep(keep)
	var parts []KeyGroupState
	for kg := a.owned.Start; kg < a.owned.End; kg++ {
		t := a.tables[kg]
		if t.n == 0 {
			continue
		}
		// Small allocations, one group at a time. (One large allocation
		// for all groups measured no faster.)
		parts = append(parts, KeyGroupState{KeyGroup: kg, Batch: t.batch(a.snapBufs)})
	}
	return parts, nil
}

// kaggRestorePerGoroutine is the number of keys below which a restore
// stays on the calling goroutine: starting others costs more than it saves.
const kaggRestorePerGoroutine = 1 << 16

// Restore loads key groups saved by Snapshot. Each key must hash to the key
// group it is filed under and appear once; anything else means the state
// does not belong to this operator and is rejected. After an error the
// instance must be discarded.
//
// Key groups have tables of their own, so a large state is restored on up
// to GOMAXPROCS goroutines, each taking a run of parts with about the same
// number of keys. Rebuilding hash tables is bound by memory traffic (the
// new tables are twice the size of the state), which one core cannot
// saturate; with -cpu 1 the same code runs on one goroutine.
func (a *keyedAgg) Restore(parts []KeyGroupState) error {
	defer a.syncSlots() // restoring grows tables
	a.track.reset()     // what Restore loads is durable
	runs := kaggRestoreRuns(parts, runtime.GOMAXPROCS(0))
	if len(runs) <= 1 {
		return a.restoreParts(parts)
	}
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() { errs[i] = a.restoreParts(run) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first in part order, as a serial restore reports
		}
	}
	return nil
}

func (a *keyedAgg) Close() error {
	if a.snapBufs != nil {
		a.snapBufs.close()
		a.snapBufs = nil
	}
	a.freeTables()
	a.changed, a.nChanged = nil, 0
	a.track = kaggTrack{}
	return nil
}
