package operator_test

import (
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// ktLargeState returns the parts of a snapshot of 300k distinct keys: big
// enough that Restore splits the work over goroutines.
func ktLargeState(t *testing.T, mem memory.Allocator, r *rand.Rand) []operator.KeyGroupState {
	t.Helper()
	op := ktOpen(t, mem, keygroup.All)
	defer op.Close()
	rows := make([][]int64, 300_000)
	for i := range rows {
		rows[i] = []int64{int64(i), int64(i)*7919 + r.Int64N(7919), r.Int64N(1000), 0}
	}
	ktProcess(t, op, mem, rows)
	ktFlush(t, op)
	parts, err := op.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return parts
}

// TestKeyedAggRestoreOnSeveralGoroutines restores a large state with
// GOMAXPROCS 4, so the key groups are restored concurrently: the restored
// state equals the snapshot, the instance goes on counting from it, the
// first error in part order is the one reported, and repeated key groups
// (which share a table) are restored serially and rejected.
func TestKeyedAggRestoreOnSeveralGoroutines(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	mem := checkedMem(t)
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 7))
	parts := ktLargeState(t, mem, r)
	defer operator.ReleaseStates(parts)
	if len(parts) != keygroup.Count {
		t.Fatalf("seed %d: %d parts, want every key group", seed, len(parts))
	}

	op := ktOpen(t, mem, keygroup.All)
	if err := op.Restore(parts); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if got, want := ktSnapshotRows(t, op), ktPartsRows(parts); !ktSameState(got, want) {
		t.Fatalf("seed %d: restored state differs from the snapshot", seed)
	}
	// One more row for a restored key and one for a new key.
	old := optest.Rows(parts[len(parts)-1].Batch)[0] // key, count, sum
	fresh := int64(-1)                               // the generated keys are >= 0
	ktProcess(t, op, mem, [][]int64{{0, old[0], 5, 0}, {1, fresh, 7, 0}})
	got := optest.Sorted(ktFlush(t, op))
	want := optest.Sorted([][]int64{{old[0], old[1] + 1, old[2] + 5, old[1] + 1}, {fresh, 1, 7, 1}})
	if !ktSameState(map[int][][]int64{0: got}, map[int][][]int64{0: want}) {
		t.Fatalf("seed %d: after restore, flush gave %v, want %v", seed, got, want)
	}
	op.Close()

	// Two bad parts, one early and one late: the early one is reported.
	bad := append([]operator.KeyGroupState(nil), parts...)
	early, late := 3, len(bad)-2
	zero := optest.Batch(mem, op.StateSchema(), [][]int64{{ktKeyInGroup(bad[early].KeyGroup), 0, 1}})
	defer zero.Release()
	foreign := optest.Batch(mem, op.StateSchema(), [][]int64{{ktKeyInGroup(bad[early].KeyGroup), 1, 1}})
	defer foreign.Release()
	bad[early].Batch, bad[late].Batch = zero, foreign
	op = ktOpen(t, mem, keygroup.All)
	err := op.Restore(bad)
	op.Close()
	if err == nil || !strings.Contains(err.Error(), "count 0") {
		t.Fatalf("seed %d: restore with a zero count early and a foreign key late: err = %v, want the zero count", seed, err)
	}

	// A key group listed twice: serial, and its keys are found twice.
	twice := append(append([]operator.KeyGroupState(nil), parts...), parts[len(parts)/2])
	op = ktOpen(t, mem, keygroup.All)
	err = op.Restore(twice)
	op.Close()
	// The error names a key of that group.
	if err == nil || !regexp.MustCompile(`key -?\d+ appears twice`).MatchString(err.Error()) {
		t.Fatalf("seed %d: restore with a key group listed twice: err = %v, want one naming a key", seed, err)
	}
}
