package state_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// largeParts is a state of a few hundred kilobytes.
func largeParts(mem memory.Allocator) []operator.KeyGroupState {
	rows := make([][]int64, 20000)
	for i := range rows {
		rows[i] = []int64{int64(i), int64(i * 7)}
	}
	return []operator.KeyGroupState{
		{KeyGroup: 1, Batch: optest.Batch(mem, schema, rows[:len(rows)/2])},
		{KeyGroup: 9, Batch: optest.Batch(mem, schema, rows[len(rows)/2:])},
	}
}

// TestEncodeAllToMatchesEncodeAll: the blob EncodeAllTo hands over is
// EncodeAll's, byte for byte, for a large state and a small one; by the
// time use sees it, every batch it took over is released; use's error
// comes back as it is.
func TestEncodeAllToMatchesEncodeAll(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for name, build := range map[string]func(memory.Allocator) []operator.KeyGroupState{
		"large": largeParts, "small": parts, "none": func(memory.Allocator) []operator.KeyGroupState { return nil },
	} {
		var want bytes.Buffer
		ref := build(mem)
		if err := state.EncodeAll(&want, "op/1", ref); err != nil {
			t.Fatal(err)
		}
		operator.ReleaseStates(ref)
		alloc := mem.CurrentAlloc()
		in := build(mem)
		calls := 0
		err := state.EncodeAllTo("op/1", in, func(blob []byte) error {
			calls++
			if !bytes.Equal(blob, want.Bytes()) {
				t.Errorf("%s: EncodeAllTo's blob (%d bytes) differs from EncodeAll's (%d)", name, len(blob), want.Len())
			}
			if got := mem.CurrentAlloc(); got != alloc {
				t.Errorf("%s: %d bytes of the snapshot still held when its blob is complete, want 0", name, got-alloc)
			}
			return nil
		})
		if err != nil || calls != 1 {
			t.Fatalf("%s: error %v after %d calls of use", name, err, calls)
		}
	}
	stop := errors.New("put failed")
	if err := state.EncodeAllTo("op/1", largeParts(mem), func([]byte) error { return stop }); err != stop {
		t.Fatalf("use's error came back as %v", err)
	}
	bad := largeParts(mem)
	bad[1].KeyGroup = 200
	if err := state.EncodeAllTo("op/1", bad, func([]byte) error { t.Fatal("use called for a bad state"); return nil }); err == nil {
		t.Fatal("key group 200 encoded")
	}
	// mem.AssertSize: the parts of the failed calls are released too.
}
