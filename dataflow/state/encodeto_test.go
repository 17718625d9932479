package state_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/offheap"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// TestEncodeAllToMatchesEncodeAll: the blob EncodeAllTo hands over is
// EncodeAll's, byte for byte, for a state large enough to be encoded
// outside the heap and for a small one; its memory is freed once use
// returns, and use's error comes back as it is.
func TestEncodeAllToMatchesEncodeAll(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rows := make([][]int64, 3*offheap.MinBytes/16)
	for i := range rows {
		rows[i] = []int64{int64(i), int64(i * 7)}
	}
	large := []operator.KeyGroupState{
		{KeyGroup: 1, Batch: optest.Batch(mem, schema, rows[:len(rows)/2])},
		{KeyGroup: 9, Batch: optest.Batch(mem, schema, rows[len(rows)/2:])},
	}
	defer operator.ReleaseStates(large)
	small := parts(mem)
	defer operator.ReleaseStates(small)
	for name, in := range map[string][]operator.KeyGroupState{"large": large, "small": small, "none": nil} {
		var want bytes.Buffer
		if err := state.EncodeAll(&want, "op/1", in); err != nil {
			t.Fatal(err)
		}
		before := offheap.Live()
		calls := 0
		err := state.EncodeAllTo("op/1", in, func(blob []byte) error {
			calls++
			if !bytes.Equal(blob, want.Bytes()) {
				t.Errorf("%s: EncodeAllTo's blob (%d bytes) differs from EncodeAll's (%d)", name, len(blob), want.Len())
			}
			if name == "large" && offheap.Live() <= before {
				t.Errorf("%s: a %d-byte blob was not encoded outside the heap", name, len(blob))
			}
			return nil
		})
		if err != nil || calls != 1 {
			t.Fatalf("%s: error %v after %d calls of use", name, err, calls)
		}
		if got := offheap.Live(); got != before {
			t.Fatalf("%s: %d bytes mapped after EncodeAllTo, want %d", name, got, before)
		}
	}
	stop := errors.New("put failed")
	if err := state.EncodeAllTo("op/1", large, func([]byte) error { return stop }); err != stop {
		t.Fatalf("use's error came back as %v", err)
	}
	bad := []operator.KeyGroupState{{KeyGroup: 200, Batch: large[0].Batch}}
	if err := state.EncodeAllTo("op/1", bad, func([]byte) error { t.Fatal("use called for a bad state"); return nil }); err == nil {
		t.Fatal("key group 200 encoded")
	}
}
