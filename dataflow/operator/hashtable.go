package operator

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/offheap"
)

// kaggEntry is one key's aggregate, 24 bytes. A slot is empty exactly when
// count is 0: every stored key has been seen at least once, so no separate
// occupancy flag (and no reserved key value) is needed, and zeroed memory is
// an empty table. The top bit of count (kaggDirty) marks a key changed since
// the last Flush; a real count never reaches it.
type kaggEntry struct {
	key, count, sum int64
}

// kaggDirty is the changed-since-Flush bit of kaggEntry.count.
const kaggDirty = -1 << 63

// kaggPending is the bit of kaggEntry.count marking a key changed since
// the last SnapshotChanges (so it is listed once); a real count never
// reaches it either. Flush sets it, SnapshotChanges clears it.
const kaggPending = 1 << 62

// kaggTable is an open-addressing hash table from int64 key to kaggEntry with
// power-of-two capacity and linear probing. The caller supplies the key's
// hash (keygroup.Hash), so each key is hashed once for both key-group routing
// and slot selection. There are no deletes: keyed state only grows.
//
// Large tables live outside Go's heap (package offheap): they are most of a
// large state, and on the heap the collector's slack would double them.
type kaggTable struct {
	slots  []kaggEntry
	mem    *offheap.Array[kaggEntry] // holds slots
	n      int                       // stored keys
	growAt int                       // n at which the table doubles
	// grownIn is the flush epoch of the last rehash: slot indexes recorded
	// in that epoch may be stale. Epochs count Flush calls.
	grownIn uint64
}

// kaggMinSlots is the capacity of a table after its first insert.
const kaggMinSlots = 16

// kaggMaxLoadNum/kaggMaxLoadDen is the load factor that triggers growth.
// Measured on 100k uniform keys: at load ~0.38 the loop ran about 1.6x as
// fast as at ~0.76, because most lookups then hit the home slot and the
// probe loop's exit branch is predictable. The price is memory: 48 to 96
// bytes per key.
const (
	kaggMaxLoadNum = 1
	kaggMaxLoadDen = 2
)

// upsert returns the slot of key, inserting key with count 0 (which the
// caller must raise to at least 1) when it is absent. The caller has made
// room (t.n < t.growAt). The keyed aggregation's hot loop inlines a copy of
// this probe.
func (t *kaggTable) upsert(key int64, h uint64) uint64 {
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.count == 0 {
			e.key = key
			t.n++
			return i
		}
		if e.key == key {
			return i
		}
	}
}

// insertNew inserts the restored state of key group kg: keys with their
// counts and sums. The caller has reserved room for all of them. It checks
// that every key belongs to kg, has a count > 0 and was not stored
// already; on error the table holds part of the input and must be
// discarded. It is one pass (hash, check, probe), so Restore reads the keys
// once, and the checks only accumulate flags, without branches, so the
// loop stays small: Restore spends most of its time here. The error path
// finds the offending row afterwards.
func (t *kaggTable) insertNew(kg int, keys, counts, sums []int64) error {
	bad := kaggPlace(t.slots, keys, counts, sums, uint64(kg)<<57)
	t.n += len(keys)
	if bad == 0 {
		return nil
	}
	for i, k := range keys {
		if g := keygroup.Of(k); g != kg {
			return fmt.Errorf("key %d belongs to key group %d", k, g)
		}
		if counts[i] <= 0 || counts[i] >= kaggPending {
			return fmt.Errorf("key %d has count %d, want in [1, 2^62)", k, counts[i])
		}
	}
	// A key is stored twice: within these keys or also in an earlier part
	// of the same key group. The table holds both copies; find one.
	seen := make(map[int64]bool, t.n)
	for _, e := range t.slots {
		if e.count == 0 {
			continue
		}
		if seen[e.key] {
			return fmt.Errorf("key %d appears twice", e.key)
		}
		seen[e.key] = true
	}
	return errors.New("a key appears twice")
}

// kaggPlace is insertNew's loop. It returns a non-zero flag when a key is
// outside the key group whose top hash bits are group, a count is <= 0 or
// a key is found stored already. It is a function of its own, with one
// flag for all checks, so that it has registers enough: inside insertNew
// the compiler kept the error path's values live and reloaded six of them
// from the stack on every key (about 10% slower with the table in cache).
func kaggPlace(slots []kaggEntry, keys, counts, sums []int64, group uint64) uint64 {
	mask := uint64(len(slots) - 1)
	counts, sums = counts[:len(keys)], sums[:len(keys)]
	var bad uint64
	for i, k := range keys {
		h := keygroup.Hash(k)
		c := counts[i]
		bad |= (h^group)>>57 | uint64(kaggB2I(uint64(c-1) >= kaggPending-1)) // c outside [1, kaggPending)
		x := h & mask
		for slots[x].count != 0 {
			bad |= uint64(kaggB2I(slots[x].key == k))
			x = (x + 1) & mask
		}
		slots[x] = kaggEntry{key: k, count: c, sum: sums[i]}
	}
	return bad
}

// reserve grows the table so that n more keys fit without growing again.
// epoch is the current flush epoch (see grownIn).
func (t *kaggTable) reserve(n int, epoch uint64) {
	need := t.n + n
	size := max(len(t.slots), kaggMinSlots)
	for need > size/kaggMaxLoadDen*kaggMaxLoadNum {
		size *= 2
	}
	if size > len(t.slots) {
		t.grow(size, epoch)
	}
}

// touchEmpty writes one empty slot in every memory page of an empty
// table, before insertNew probes it. A fresh table is memory straight from
// the OS (a new mapping, or pages the Go runtime just took), not yet mapped: insertNew's first
// access to a page is a read, which maps the shared zero page, and its
// store then faults a second time to get a private page. Writing first
// costs one fault per page instead of two: BenchmarkRestoreDecode (1M
// keys) took about a fifth fewer page faults and a third less system time.
func (t *kaggTable) touchEmpty() {
	const perPage = 4096 / 24 // kaggEntry is 24 bytes
	for i := 0; i < len(t.slots); i += perPage {
		t.slots[i] = kaggEntry{}
	}
}

// grow rehashes into size slots (a power of two) during flush epoch epoch.
func (t *kaggTable) grow(size int, epoch uint64) {
	size = max(size, kaggMinSlots)
	t.grownIn = epoch
	old, oldMem := t.slots, t.mem
	t.mem = offheap.New[kaggEntry](size)
	t.slots = t.mem.S
	t.growAt = size / kaggMaxLoadDen * kaggMaxLoadNum
	mask := uint64(size - 1)
	for i := range old {
		e := &old[i]
		if e.count == 0 {
			continue
		}
		j := keygroup.Hash(e.key) & mask
		for t.slots[j].count != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = *e
	}
	oldMem.Free()
}

// free returns the table's memory; the table is empty and unusable after.
func (t *kaggTable) free() {
	t.mem.Recycle() // an operator restoring this state asks for it again
	t.mem, t.slots, t.n, t.growAt = nil, nil, 0, 0
}

// batch returns the stored entries as a (key, count, sum) batch in memory
// from alloc. compact writes every value but perhaps the spare one, which
// the IPC writer may still copy out with the buffer: it is zeroed so that
// recycled memory needs no clearing and equal states encode to equal bytes.
func (t *kaggTable) batch(alloc memory.Allocator) arrow.RecordBatch {
	keyArr, kv := helpAllocInt64(alloc, t.n, 1)
	cntArr, cv := helpAllocInt64(alloc, t.n, 1)
	sumArr, sv := helpAllocInt64(alloc, t.n, 1)
	t.compact(kv, cv, sv)
	kv[t.n], cv[t.n], sv[t.n] = 0, 0, 0
	return NewBatchOwning(kaggStateSchema, t.n, keyArr, cntArr, sumArr)
}

// compact copies the stored entries into keys, counts and sums, which have
// room for t.n+1 values. Every slot is written and the output index only
// advances past stored ones: at load 1/4 to 1/2 a branch on "stored" would
// mispredict on a large share of slots. The spare value absorbs the writes
// of empty slots after the last stored one.
func (t *kaggTable) compact(keys, counts, sums []int64) {
	n, slots := t.n, t.slots
	keys, counts, sums = keys[:n+1], counts[:n+1], sums[:n+1]
	j := 0
	for i := range slots {
		e := &slots[i]
		j = min(j, n) // proves j in bounds, so no bounds checks in the loop
		keys[j], counts[j], sums[j] = e.key, e.count&^kaggPending, e.sum
		j += kaggB2I(e.count != 0)
	}
}
