package operator

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestKaggRestoreRuns checks how Restore splits its parts over goroutines:
// contiguous runs that together are the parts in order, at most n of them,
// each but the last holding about its share of the keys; one run for small
// states, for n = 1, and whenever a key group repeats.
func TestKaggRestoreRuns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the parts are released
	// parts builds one part per key group with the given row counts; the
	// batches hold zeros, only their lengths matter here.
	parts := func(rows ...int) []KeyGroupState {
		ps := make([]KeyGroupState, len(rows))
		for i, n := range rows {
			k, _ := AllocInt64(mem, n)
			c, _ := AllocInt64(mem, n)
			s, _ := AllocInt64(mem, n)
			ps[i] = KeyGroupState{KeyGroup: i, Batch: NewBatchOwning(kaggStateSchema, n, k, c, s)}
		}
		t.Cleanup(func() { ReleaseStates(ps) })
		return ps
	}
	const big = kaggRestorePerGoroutine
	for _, tc := range []struct {
		name string
		ps   []KeyGroupState
		n    int
		runs int // the number of runs wanted
	}{
		{"small state", parts(10, 20, 30), 4, 1},
		{"one goroutine", parts(big, big, big, big), 1, 1},
		{"fewer parts than goroutines", parts(3*big, 3*big), 8, 2},
		{"even", parts(big, big, big, big, big, big, big, big), 4, 4},
		{"just enough for two", parts(big, big/2, big/2), 4, 2},
		{"uneven", parts(4*big, 1, 1, 1, 2*big, 2*big), 4, 4},
	} {
		runs := kaggRestoreRuns(tc.ps, tc.n)
		if len(runs) != tc.runs {
			t.Errorf("%s: %d runs, want %d", tc.name, len(runs), tc.runs)
		}
		var joined []KeyGroupState
		for _, r := range runs {
			if len(r) == 0 {
				t.Errorf("%s: an empty run", tc.name)
			}
			joined = append(joined, r...)
		}
		if !slices.Equal(joined, tc.ps) {
			t.Errorf("%s: the runs joined are not the parts in order", tc.name)
		}
	}
	// A key group listed twice shares a table: never split.
	ps := parts(big, big, big, big)
	ps[3].KeyGroup = ps[1].KeyGroup
	if runs := kaggRestoreRuns(ps, 4); len(runs) != 1 {
		t.Errorf("repeated key group: %d runs, want 1", len(runs))
	}
	if kaggRestoreRuns(nil, 4) == nil || len(kaggRestoreRuns(nil, 4)) != 1 {
		t.Errorf("no parts: want one (empty) run")
	}
}
