package recordwise

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// A hash edge puts every row on the channel owning its key group, whole
// (every column of the row, not a neighbour's) and in the order emitted,
// across several emits and buffer flushes, and accounts each channel's
// rows to their hand-over times.
func TestRouterHashEdgeKeepsRowsWholeAndInOrder(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	const p, bufRows = 3, 100
	qs := make([]*queue, p)
	for i := range qs {
		qs[i] = newQueue(1<<20, 0, newWaker(), newWaker())
	}
	r := newRouter(alloc, source.Schema, bufRows, time.Hour, p)
	r.addEdge(job.Hash, source.IdxKey, qs)
	now := time.Now()
	next := int64(0)
	for e := 0; e < 7; e++ {
		n := 1 + rng.IntN(500)
		b := rowsOf(alloc, next, n)
		next += int64(n)
		if err := r.emit(b, []latEntry{{born: now, rows: int64(n)}}, now); err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	r.flushAll()
	seen := make([]bool, next)
	for d, oc := range r.outs {
		last, rows, births := int64(-1), int64(0), int64(0)
		for _, it := range oc.staged[oc.sHead:] {
			cols := make([][]int64, 4)
			for c := range cols {
				cols[c] = it.batch.Column(c).(*array.Int64).Int64Values()
			}
			for i, id := range cols[source.IdxID] {
				key := cols[source.IdxKey][i]
				if got := keygroup.Owner(keygroup.Of(key), p); got != d {
					t.Fatalf("row %d (key %d) on channel %d, its owner is %d", id, key, d, got)
				}
				if id <= last || id >= next || seen[id] {
					t.Fatalf("channel %d has row %d after row %d", d, id, last)
				}
				if key != keyOf(id) || cols[source.IdxValue][i] != 10*id || cols[source.IdxTS][i] != 100*id {
					t.Fatalf("row %d has key %d value %d ts %d, want %d %d %d", id, key,
						cols[source.IdxValue][i], cols[source.IdxTS][i], keyOf(id), 10*id, 100*id)
				}
				last, seen[id] = id, true
			}
			rows += it.batch.NumRows()
			for _, l := range it.births {
				births += l.rows
			}
			it.release()
		}
		if births != rows {
			t.Fatalf("channel %d: %d rows accounted to hand-over times, %d rows", d, births, rows)
		}
	}
	for id, ok := range seen {
		if !ok {
			t.Fatalf("row %d was routed nowhere", id)
		}
	}
}

// keyOf is a row's key, a function of its id, so a test can tell a row's
// columns from a neighbour's.
func keyOf(id int64) int64 { return id*7919%1000 - 300 }

// rowsOf is n source rows with ids from first.
func rowsOf(alloc memory.Allocator, first int64, n int) arrow.RecordBatch {
	cols := make([]arrow.Array, 4)
	vals := make([][]int64, 4)
	for c := range cols {
		cols[c], vals[c] = operator.AllocInt64(alloc, n)
	}
	for i := range n {
		id := first + int64(i)
		vals[source.IdxID][i], vals[source.IdxKey][i] = id, keyOf(id)
		vals[source.IdxValue][i], vals[source.IdxTS][i] = 10*id, 100*id
	}
	return operator.NewBatchOwning(source.Schema, n, cols...)
}
