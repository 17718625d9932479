package diskphase

import (
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// A resumed disk-phase run keeps what its units were cut from.
func TestOptionsFixTheUnits(t *testing.T) {
	fixed := Options{JobRecords: 4000, JobInterval: time.Second}.Fixed(run.Config{Parallelism: 3})
	want := map[string]string{"--parallelism": "3", "--job-records": "4000", "--job-interval": "1s"}
	if len(fixed) != len(want) {
		t.Fatalf("fixed %v, want %v", fixed, want)
	}
	for k, v := range want {
		if fixed[k] != v {
			t.Fatalf("fixed %v, want %v", fixed, want)
		}
	}
	if p := (Executor{}).Traits().FirstDurablePoint; p != pointAfterCommit {
		t.Fatalf("first durable point %q, want %q", p, pointAfterCommit)
	}
}

// For diskphase the cadence bench gives is the finite-job interval, which
// replaces a records range (the two cannot both be set).
func TestWithCadenceSetsTheJobInterval(t *testing.T) {
	o := Options{JobRecords: 4000, LostPieceRecovery: "lineage"}.WithCadence(2 * time.Second)
	got := o.(Options)
	if o.Cadence() != 2*time.Second || got.JobInterval != 2*time.Second || got.JobRecords != 0 || got.LostPieceRecovery != "lineage" {
		t.Fatalf("WithCadence(2s): %+v, cadence %s; want interval 2s, no records range, the rest kept", got, o.Cadence())
	}
	if c := (Options{JobRecords: 10}).Cadence(); c != 0 {
		t.Fatalf("a records range: cadence %s, want 0", c)
	}
}
