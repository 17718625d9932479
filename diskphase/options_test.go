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
