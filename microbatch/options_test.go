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
