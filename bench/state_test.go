package bench

import (
	"math"
	"slices"
	"testing"
)

// TestStateRecordsDrawsEveryKey: keys × (ln keys + 1) uniform draws leave
// fewer than one key undrawn in expectation, and the floor holds.
func TestStateRecordsDrawsEveryKey(t *testing.T) {
	for _, k := range []int64{1000, 100_000, 10_000_000} {
		n := StateRecords(k, 0)
		missed := float64(k) * math.Exp(-float64(n)/float64(k))
		if missed >= 1 || n > k*20 {
			t.Errorf("%d keys: %d records leave %.2f keys undrawn", k, n, missed)
		}
	}
	if n := StateRecords(1000, 4_000_000); n != 4_000_000 {
		t.Errorf("floor: %d", n)
	}
}

// TestStateCaseArgs: the crash after three quarters of the input, and
// windowed-sum's windows a quarter of a partition's event time.
func TestStateCaseArgs(t *testing.T) {
	got := StateCaseArgs("windowed-sum", "x", []string{"--v", "a"}, 1000, 8000)
	want := []string{"run", "--executor", "x", "--v", "a", "--job", "windowed-sum", "--parallelism", "2",
		"--input", "gen:records=8000,keys=1000,partitions=2", "--fail", "worker=0,after-records=6000", "--window", "1s"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{100_000: "100 k", 10_000_000: "10 M", 1_151_293: "1.15 M", 999: "999"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}
