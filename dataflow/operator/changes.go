package operator

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// ChangeSnapshotter is implemented by Stateful operators that can hand
// over only what changed since the last acknowledged snapshot, so an
// executor that keeps its own copy of the saved state (a base) pays for
// the change, not for the state.
//
// # Sequence and acknowledgement
//
// Every SnapshotChanges returns a sequence number, higher than any before.
// It holds everything changed since the last snapshot the executor
// acknowledged with AckChanges, not since the last SnapshotChanges: a
// snapshot whose recovery point never became durable is simply not
// acknowledged, and the next one carries its changes again. Acknowledging
// seq forgets the changes that snapshot seq (and every earlier one) held,
// but not what changed after it was taken. The state Restore loads counts
// as acknowledged: it is durable already. Executors that mix this with
// Snapshot get no help from it: Snapshot neither needs nor clears marks.
//
// # Ownership
//
// Like Snapshot: the batches are a copy, the caller releases them
// (ReleaseChanges), and processing may continue while the caller encodes
// them. SnapshotChanges has Snapshot's precondition (Flush first).
// AckChanges is called between Process calls, never concurrently with one.
type ChangeSnapshotter interface {
	Stateful
	SnapshotChanges() (StateChanges, error)
	AckChanges(seq uint64)
}

// StateChanges is one change hand-over.
type StateChanges struct {
	Seq uint64
	// KeyColumn is the state column identifying an entry within its key
	// group, for groups handed over as entries (-1: none are).
	KeyColumn int
	// Groups are the changed key groups, in key-group order.
	Groups []GroupChange
}

// GroupChange is the change of one key group. Batch has the operator's
// StateSchema. When Entries is false, Batch is the whole group as Snapshot
// would return it (zero rows: the group is now empty). When Entries is
// true, Batch holds only entries that are new or may have changed (a
// superset is allowed), at most once each, identified by column KeyColumn;
// every other entry is as it was, and no entry was removed: an operator
// whose entries can disappear hands such a group over whole. Rows is the
// number of entries the group holds now, so the caller can check its
// copy against the operator.
type GroupChange struct {
	KeyGroup int
	Batch    arrow.RecordBatch
	Entries  bool
	Rows     int
}

// ReleaseChanges releases every batch of c.
func ReleaseChanges(c StateChanges) {
	for _, g := range c.Groups {
		if g.Batch != nil {
			g.Batch.Release()
		}
	}
}

// groupMarks tracks which key groups changed since the last acknowledged
// snapshot, for operators that hand over whole groups. changed[kg] is the
// sequence number of the snapshot that will first see the change.
type groupMarks struct {
	next    uint64 // sequence number of the next snapshot
	acked   uint64
	changed [keygroup.Count]uint64
}

func (m *groupMarks) reset() { *m = groupMarks{next: 1} }

func (m *groupMarks) mark(kg int) {
	if m.next == 0 {
		m.next = 1
	}
	m.changed[kg] = m.next
}

// take returns the sequence number of a snapshot being taken now and
// reports for which groups it must hold.
func (m *groupMarks) take() (seq uint64, dirty func(kg int) bool) {
	if m.next == 0 {
		m.next = 1
	}
	seq, acked, changed := m.next, m.acked, m.changed
	m.next++
	return seq, func(kg int) bool { return changed[kg] > acked }
}

func (m *groupMarks) ack(seq uint64) { m.acked = max(m.acked, seq) }

// wholeGroupChanges turns parts (a snapshot of the dirty groups that are
// not empty) into a hand-over with an empty batch for every dirty group
// that is empty now.
func wholeGroupChanges(seq uint64, schema *arrow.Schema, alloc memory.Allocator, r keygroup.Range,
	dirty func(kg int) bool, parts []KeyGroupState) StateChanges {
	out := StateChanges{Seq: seq, KeyColumn: -1}
	i := 0
	for kg := r.Start; kg < r.End; kg++ {
		if i < len(parts) && parts[i].KeyGroup == kg {
			b := parts[i].Batch
			out.Groups = append(out.Groups, GroupChange{KeyGroup: kg, Batch: b, Rows: int(b.NumRows())})
			i++
			continue
		}
		if dirty(kg) {
			out.Groups = append(out.Groups, GroupChange{KeyGroup: kg, Batch: emptyBatch(schema, alloc)})
		}
	}
	return out
}

func emptyBatch(schema *arrow.Schema, alloc memory.Allocator) arrow.RecordBatch {
	cols := make([]arrow.Array, schema.NumFields())
	for i, f := range schema.Fields() {
		cols[i] = array.MakeArrayOfNull(helpAlloc(alloc), f.Type, 0)
	}
	return NewBatchOwning(schema, 0, cols...)
}
