package microbatch

import (
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// The flags' options arrive in run.Config.Options; an Executor's own
// Options win field by field, then the package defaults apply.
func TestOptionsResolveFlagsUnderTheExecutors(t *testing.T) {
	cfg := run.Config{Parallelism: 2, Options: Options{Trigger: time.Second, MaxBatchRecords: 50, LostPieceRecovery: RecoveryRerunBatch}}
	r, err := Options{MaxBatchRecords: 7}.resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.trigger != time.Second || r.maxBatch != 7 || r.lineage || r.retained != DefaultRetainedBatches {
		t.Fatalf("resolved trigger %s, max batch %d, lineage %v, retained %d; want 1s, 7, false, %d",
			r.trigger, r.maxBatch, r.lineage, r.retained, DefaultRetainedBatches)
	}
	if f := (Options{}).Fixed(cfg); len(f) != 0 {
		t.Fatalf("microbatch fixes %v on a resume, want nothing", f)
	}
}

// For microbatch the cadence bench gives is the trigger interval.
func TestWithCadenceSetsTheTrigger(t *testing.T) {
	o := Options{Trigger: 100 * time.Millisecond, MaxBatchRecords: 9}.WithCadence(750 * time.Millisecond)
	got := o.(Options)
	if o.Cadence() != 750*time.Millisecond || got.Trigger != 750*time.Millisecond || got.MaxBatchRecords != 9 {
		t.Fatalf("WithCadence(750ms): %+v, cadence %s; want trigger 750ms, the rest kept", got, o.Cadence())
	}
	r, err := got.resolve(run.Config{Parallelism: 1, Options: Options{Trigger: time.Second}})
	if err != nil || r.trigger != 750*time.Millisecond {
		t.Fatalf("resolved %+v, %v: the cadence must win over the flags' trigger", r, err)
	}
}
