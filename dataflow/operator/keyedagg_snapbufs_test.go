package operator_test

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// ktCountingAlloc counts the allocations that reach the allocator.
type ktCountingAlloc struct {
	memory.Allocator
	n atomic.Int64
}

func (c *ktCountingAlloc) Allocate(size int) []byte {
	c.n.Add(1)
	return c.Allocator.Allocate(size)
}

func ktPartsRows(parts []operator.KeyGroupState) map[int][][]int64 {
	got := map[int][][]int64{}
	for _, p := range parts {
		got[p.KeyGroup] = optest.Sorted(optest.Rows(p.Batch))
	}
	return got
}

func ktRandomRows(r *rand.Rand, n int) [][]int64 {
	pairs := make([]int64, 0, 2*n)
	for range n {
		pairs = append(pairs, r.Int64N(5000)-2500, r.Int64N(100))
	}
	return ktRows(pairs...)
}

func ktSameState(a, b map[int][][]int64) bool {
	return maps.EqualFunc(a, b, func(x, y [][]int64) bool { return slices.EqualFunc(x, y, slices.Equal) })
}

// TestKeyedAggSnapshotReusesReleasedMemory checks that a snapshot taken
// after the previous one was released allocates nothing, that it holds the
// same state, and that a snapshot taken while an earlier one is still held
// leaves the held one intact.
func TestKeyedAggSnapshotReusesReleasedMemory(t *testing.T) {
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	ca := &ktCountingAlloc{Allocator: mem}
	op := ktOpen(t, ca, keygroup.All)
	defer op.Close()
	ktProcess(t, op, mem, ktRandomRows(r, 3000))
	ktFlush(t, op)

	first, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := ktPartsRows(first)
	operator.ReleaseStates(first)
	before := ca.n.Load()
	held, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer operator.ReleaseStates(held)
	if n := ca.n.Load() - before; n != 0 {
		t.Errorf("seed %d: snapshot after a released one made %d new allocations, want 0", seed, n)
	}
	if got := ktPartsRows(held); !ktSameState(got, want) {
		t.Fatalf("seed %d: snapshot in recycled memory differs from the first\n got %v\nwant %v", seed, got, want)
	}

	ktProcess(t, op, mem, ktRandomRows(r, 3000))
	ktFlush(t, op)
	next, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	changed := ktPartsRows(next)
	operator.ReleaseStates(next)
	if ktSameState(changed, want) {
		t.Fatalf("seed %d: more input left the state unchanged", seed)
	}
	if got := ktPartsRows(held); !ktSameState(got, want) {
		t.Fatalf("seed %d: a later snapshot overwrote one still held\n got %v\nwant %v", seed, got, want)
	}
}

// TestKeyedAggSnapshotReleasedAfterClose checks that memory of snapshots
// released after Close, or concurrently with the next Snapshot (as an
// asynchronous encoder does), all goes back to the allocator.
func TestKeyedAggSnapshotReleasedAfterClose(t *testing.T) {
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	op := ktOpen(t, mem, keygroup.All)
	var wg sync.WaitGroup
	var last []operator.KeyGroupState
	for range 20 {
		ktProcess(t, op, mem, ktRandomRows(r, 500))
		ktFlush(t, op)
		parts, err := op.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if prev := last; prev != nil {
			wg.Go(func() { operator.ReleaseStates(prev) })
		}
		last = parts
	}
	wg.Wait()
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	operator.ReleaseStates(last)
}

// TestKeyedAggSnapshotsOfOneStateEncodeAlike encodes the same state several
// times, each snapshot in memory recycled from the previous one: the blobs
// must be byte for byte equal (no leftover of an earlier snapshot may reach
// storage), and Snapshot of a closed instance is an error, not a crash.
func TestKeyedAggSnapshotsOfOneStateEncodeAlike(t *testing.T) {
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close() // also when a check fails; Close twice is allowed
	ktProcess(t, op, mem, ktRandomRows(r, 3000))
	ktFlush(t, op)
	var first []byte
	for i := range 5 {
		parts, err := op.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		err = state.EncodeAll(&buf, "count/0", parts)
		operator.ReleaseStates(parts)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = buf.Bytes()
		} else if !bytes.Equal(buf.Bytes(), first) {
			t.Fatalf("seed %d: snapshot %d of an unchanged state encodes to other bytes than the first", seed, i+1)
		}
	}
	op.Close()
	if _, err := op.Snapshot(); err == nil {
		t.Fatal("snapshot after Close: no error")
	}
}
