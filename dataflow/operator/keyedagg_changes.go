package operator

import (
	"errors"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

var _ ChangeSnapshotter = (*keyedAgg)(nil)

// kaggKey names a changed key and its key group.
type kaggKey struct {
	key int64
	kg  uint32
}

// kaggTrack is the keyed aggregation's record of what changed since the
// last acknowledged snapshot. Flush lists every key it emits in pending
// the first time after a SnapshotChanges (the entry's kaggPending bit says
// it is listed). SnapshotChanges moves pending to inflight under its
// sequence number and clears the bits, so a later change lists the key
// again; AckChanges drops inflight lists. What is not acknowledged is
// handed over again by the next SnapshotChanges.
//
// The list is bounded: once it names a quarter of the keys (full), it is
// dropped and the next SnapshotChanges hands over every entry, which the
// interface allows (a superset) and which then costs at most four times
// the change, read in slot order rather than key by key. An executor that
// never asks for changes (it takes full snapshots) so keeps at most a
// quarter of its keys listed, 16 bytes each, not every key.
type kaggTrack struct {
	next     uint64
	pending  []kaggKey
	inflight []kaggInflight
	spare    []kaggKey // a dropped list's memory, for the next pending
	// full: the next SnapshotChanges hands over every entry, because the
	// list overflowed or a hand-over of every entry is not acknowledged
	// yet (fullSeq, 0 when none).
	full    bool
	fullSeq uint64
}

// kaggTrackMin is the list's length below which it never overflows, so
// that a small state does not alternate between the two kinds of hand-over.
const kaggTrackMin = 4096

type kaggInflight struct {
	seq  uint64
	keys []kaggKey
}

func (t *kaggTrack) reset() {
	next := max(t.next, 1)
	*t = kaggTrack{next: next}
}

// listPending lists key k (its entry's kaggPending bit set by the caller),
// or switches to handing over every entry when the list is full.
func (a *keyedAgg) listPending(k kaggKey) {
	t := &a.track
	t.pending = append(t.pending, k)
	if n := len(t.pending); n >= kaggTrackMin && n%kaggTrackMin == 0 && 4*n >= a.keys() {
		a.overflowPending()
	}
}

// overflowPending drops the pending list for a hand-over of every entry.
// The listed entries' bits are cleared: in that mode no entry is listed.
func (a *keyedAgg) overflowPending() {
	a.unlistPending()
	a.track.full = true
}

// unlistPending clears the bits of the pending keys and drops their list.
func (a *keyedAgg) unlistPending() {
	t := &a.track
	for _, k := range t.pending {
		tb := a.tables[k.kg]
		tb.slots[tb.upsert(k.key, keygroup.Hash(k.key))].count &^= kaggPending // present: upsert only finds
	}
	t.pending, t.spare = nil, nil
}

// keys returns the number of keys the instance holds.
func (a *keyedAgg) keys() int {
	n := 0
	for kg := a.owned.Start; kg < a.owned.End; kg++ {
		n += a.tables[kg].n
	}
	return n
}

// SnapshotChanges hands over, per key group, the entries of the keys
// changed since the last acknowledged snapshot (never a removal: keyed
// state only grows). It costs a lookup per changed key, not a scan of the
// state.
func (a *keyedAgg) SnapshotChanges() (StateChanges, error) {
	if a.snapBufs == nil {
		return StateChanges{}, errors.New("keyed aggregation: snapshot of an instance not open (before Open or after Close)")
	}
	if a.nChanged > 0 {
		return StateChanges{}, fmt.Errorf("keyed aggregation: snapshot with %d changed keys not flushed; call Flush first", a.nChanged)
	}
	t := &a.track
	t.next = max(t.next, 1)
	seq := t.next
	t.next++
	if t.full || t.fullSeq != 0 {
		return a.snapshotEveryEntry(seq), nil
	}
	keys := t.pending
	if len(t.inflight) > 0 {
		// Snapshots not acknowledged (a recovery point that failed): hand
		// their keys over again, each once.
		seen := make(map[int64]bool, len(keys))
		var all []kaggKey
		for _, f := range append(t.inflight, kaggInflight{keys: keys}) {
			for _, k := range f.keys {
				if !seen[k.key] {
					seen[k.key] = true
					all = append(all, k)
				}
			}
		}
		keys = all
	}
	var per [keygroup.Count]int
	for _, k := range keys {
		per[k.kg]++
	}
	type cols struct{ k, c, s []int64 }
	var at [keygroup.Count]cols
	out := StateChanges{Seq: seq, KeyColumn: 0}
	for kg := a.owned.Start; kg < a.owned.End; kg++ {
		if per[kg] == 0 {
			continue
		}
		n := per[kg]
		keyArr, kv := AllocInt64(a.alloc, n)
		cntArr, cv := AllocInt64(a.alloc, n)
		sumArr, sv := AllocInt64(a.alloc, n)
		at[kg] = cols{kv[:0], cv[:0], sv[:0]}
		out.Groups = append(out.Groups, GroupChange{KeyGroup: kg, Entries: true, Rows: a.tables[kg].n,
			Batch: NewBatchOwning(kaggStateSchema, n, keyArr, cntArr, sumArr)})
	}
	for _, k := range keys {
		tb := a.tables[k.kg]
		e := &tb.slots[tb.upsert(k.key, keygroup.Hash(k.key))] // present: upsert only finds
		e.count &^= kaggPending
		c := &at[k.kg]
		c.k, c.c, c.s = append(c.k, k.key), append(c.c, e.count), append(c.s, e.sum)
	}
	t.inflight = append(t.inflight, kaggInflight{seq: seq, keys: t.pending})
	t.pending, t.spare = t.spare[:0], nil
	return out, nil
}

// snapshotEveryEntry is SnapshotChanges handing over every entry as
// changed. It covers every list not acknowledged, so they are dropped;
// until it is acknowledged, the next hand-overs take every entry too.
func (a *keyedAgg) snapshotEveryEntry(seq uint64) StateChanges {
	t := &a.track
	a.unlistPending() // listed since an earlier hand-over of every entry
	out := StateChanges{Seq: seq, KeyColumn: 0}
	for kg := a.owned.Start; kg < a.owned.End; kg++ {
		tb := a.tables[kg]
		if tb.n == 0 {
			continue
		}
		out.Groups = append(out.Groups, GroupChange{KeyGroup: kg, Entries: true, Rows: tb.n, Batch: tb.batch(a.alloc)})
	}
	t.full, t.fullSeq = false, seq
	t.inflight = nil
	return out
}

// AckChanges forgets the keys of snapshot seq and every earlier one.
func (a *keyedAgg) AckChanges(seq uint64) {
	t := &a.track
	if t.fullSeq != 0 && t.fullSeq <= seq {
		t.fullSeq = 0
	}
	i := 0
	for i < len(t.inflight) && t.inflight[i].seq <= seq {
		if t.spare == nil {
			t.spare = t.inflight[i].keys[:0]
		}
		i++
	}
	t.inflight = append(t.inflight[:0], t.inflight[i:]...)
}
