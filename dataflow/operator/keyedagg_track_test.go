package operator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/offheap"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var trackInSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64},
}, nil)

type trackVal struct{ count, sum int64 }

// trackOpen opens a keyed aggregation over trackInSchema owning every key
// group; the returned check fails the test unless, after Close, every
// Arrow byte and every mapped table went back.
func trackOpen(t *testing.T) (*keyedAgg, memory.Allocator, func()) {
	return trackOpenGroups(t, keygroup.All)
}

func trackOpenGroups(t *testing.T, r keygroup.Range) (*keyedAgg, memory.Allocator, func()) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	mapped := offheap.Live()
	op, err := NewKeyedAgg(trackInSchema, KeyedAggSpec{KeyColumn: "key", SumColumn: "v"})
	if err != nil {
		t.Fatal(err)
	}
	a := op.(*keyedAgg)
	if err := a.Open(Context{Alloc: mem, Parallelism: 1, KeyGroups: r}); err != nil {
		t.Fatal(err)
	}
	return a, mem, func() {
		t.Helper()
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		mem.AssertSize(t, 0)
		if got := offheap.Live(); got != mapped {
			t.Fatalf("%d bytes of tables still mapped after Close, want %d", got, mapped)
		}
	}
}

// trackFeed processes n rows with keys drawn from [0, keys) and flushes,
// adding the rows to truth.
func trackFeed(t *testing.T, a *keyedAgg, mem memory.Allocator, r *rand.Rand, n int, keys int64, truth map[int64]trackVal) {
	t.Helper()
	kb, vb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	for range n {
		k, v := r.Int64N(keys), r.Int64N(100)
		kb.Append(k)
		vb.Append(v)
		tv := truth[k]
		truth[k] = trackVal{tv.count + 1, tv.sum + v}
	}
	b := NewBatchOwning(trackInSchema, n, kb.NewArray(), vb.NewArray())
	kb.Release()
	vb.Release()
	defer b.Release()
	if err := a.Process(0, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(EmitFunc(func(arrow.RecordBatch) error { return nil })); err != nil {
		t.Fatal(err)
	}
}

// TestKeyedAggChangeListIsBounded checks the bound on the record of keys
// changed since the last acknowledged snapshot: hand-overs of changes,
// some never acknowledged, some of them of every entry because the list
// overflowed, rebuild the state exactly, and the list never names much
// more than a quarter of the keys. The test fails unless both kinds of
// hand-over happened.
func TestKeyedAggChangeListIsBounded(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	a, mem, check := trackOpen(t)
	defer check()
	truth := map[int64]trackVal{}
	durable := map[int64]trackVal{}
	var everyEntry, onlyChanges int
	const keys = 1 << 16
	for round := range 60 {
		ctx := fmt.Sprintf("seed %d round %d", seed, round)
		// Mostly small rounds (a few thousand keys: a list of changes),
		// now and then one that changes most keys (the list overflows).
		n := 2000 + r.IntN(4000)
		if r.IntN(5) == 0 {
			n = 4 * keys
		}
		trackFeed(t, a, mem, r, n, keys, truth)
		trackCheckBound(t, ctx, a)
		wasFull := a.track.full || a.track.fullSeq != 0
		c, err := a.SnapshotChanges()
		if err != nil {
			t.Fatal(err)
		}
		next := make(map[int64]trackVal, len(durable))
		for k, v := range durable {
			next[k] = v
		}
		handed := 0
		for _, g := range c.Groups {
			if !g.Entries || c.KeyColumn != 0 {
				t.Fatalf("%s: key group %d handed over whole", ctx, g.KeyGroup)
			}
			k, cnt, sum := trackCols(g.Batch)
			for i := range k {
				next[k[i]] = trackVal{cnt[i], sum[i]}
			}
			handed += len(k)
		}
		ReleaseChanges(c)
		if wasFull {
			everyEntry++
			if handed != len(truth) {
				t.Fatalf("%s: a hand-over of every entry held %d, the state %d", ctx, handed, len(truth))
			}
		} else {
			onlyChanges++
		}
		if len(next) != len(truth) {
			t.Fatalf("%s: hand-overs rebuild %d keys, the state holds %d", ctx, len(next), len(truth))
		}
		for k, v := range truth {
			if next[k] != v {
				t.Fatalf("%s: key %d: hand-overs rebuild %v, the state is %v", ctx, k, next[k], v)
			}
		}
		if r.IntN(3) == 0 {
			continue // not durable: the next hand-over must carry it again
		}
		durable = next
		a.AckChanges(c.Seq)
	}
	if everyEntry == 0 || onlyChanges == 0 {
		t.Fatalf("seed %d: %d hand-overs of every entry and %d of changes, want some of each", seed, everyEntry, onlyChanges)
	}
}

// TestKeyedAggNeverAskedListsFew: an executor that takes only full
// snapshots never asks for changes; the operator must not keep a list of
// every key it saw for it.
func TestKeyedAggNeverAskedListsFew(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	a, mem, check := trackOpen(t)
	defer check()
	truth := map[int64]trackVal{}
	for range 20 {
		trackFeed(t, a, mem, r, 20000, 1<<20, truth)
		trackCheckBound(t, fmt.Sprintf("seed %d", seed), a)
	}
	if a.keys() != len(truth) || len(truth) < 300000 {
		t.Fatalf("seed %d: the operator holds %d keys, the input had %d", seed, a.keys(), len(truth))
	}
	if !a.track.full {
		t.Fatalf("seed %d: %d keys and the list never overflowed", seed, a.keys())
	}
}

// trackCheckBound fails the test when the list of changed keys names more
// than a quarter of the keys (or the minimum), give or take the listings
// between two checks of its length.
func trackCheckBound(t *testing.T, ctx string, a *keyedAgg) {
	t.Helper()
	if limit := max(kaggTrackMin, a.keys()/4) + kaggTrackMin; len(a.track.pending) > limit {
		t.Fatalf("%s: %d keys listed for %d held, want at most %d", ctx, len(a.track.pending), a.keys(), limit)
	}
}

func trackCols(b arrow.RecordBatch) (k, c, s []int64) {
	return b.Column(0).(*array.Int64).Int64Values(), b.Column(1).(*array.Int64).Int64Values(),
		b.Column(2).(*array.Int64).Int64Values()
}

// TestKeyedAggLargeSnapshotIsMapped: the buffers of a large state's
// snapshot are mapped outside Go's heap and unmapped as soon as they are
// released, not kept for the next snapshot.
func TestKeyedAggLargeSnapshotIsMapped(t *testing.T) {
	a, mem, check := trackOpenGroups(t, keygroup.Range{Start: 0, End: 1})
	defer check()
	kb, vb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	n := 0
	for k := int64(0); n < 3*offheap.MinBytes/8; k++ {
		if keygroup.Of(k) == 0 {
			kb.Append(k)
			vb.Append(k)
			n++
		}
	}
	b := NewBatchOwning(trackInSchema, n, kb.NewArray(), vb.NewArray())
	kb.Release()
	vb.Release()
	if err := a.Process(0, b, nil); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if err := a.Flush(EmitFunc(func(arrow.RecordBatch) error { return nil })); err != nil {
		t.Fatal(err)
	}
	tables := offheap.Live()
	for round := range 2 {
		parts, err := a.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) != 1 || parts[0].Batch.NumRows() != int64(n) {
			t.Fatalf("snapshot %d of %d keys: %d parts", round, n, len(parts))
		}
		if snap, want := offheap.Live()-tables, int64(3*n*8); snap < want {
			t.Fatalf("snapshot %d of %d keys mapped %d bytes, want at least %d", round, n, snap, want)
		}
		k, c, _ := trackCols(parts[0].Batch)
		for i := range k {
			if keygroup.Of(k[i]) != 0 || c[i] != 1 {
				t.Fatalf("snapshot %d row %d: key %d count %d", round, i, k[i], c[i])
			}
		}
		ReleaseStates(parts)
		if got := offheap.Live() - tables; got != 0 {
			t.Fatalf("released snapshot %d: %d bytes still mapped, want 0", round, got)
		}
	}
}
