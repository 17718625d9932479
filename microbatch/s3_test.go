package microbatch

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// s3URL returns an S3 storage location on $REWIND_S3_ENDPOINT (the
// Makefile's test target starts a server), or skips. With
// REWIND_REQUIRE_S3=1 a missing endpoint fails instead, as in
// dataflow/storage.
func s3URL(t *testing.T) string {
	t.Helper()
	if os.Getenv(storage.EnvS3Endpoint) == "" {
		if os.Getenv("REWIND_REQUIRE_S3") == "1" {
			t.Fatalf("REWIND_REQUIRE_S3=1 but %s is not set", storage.EnvS3Endpoint)
		}
		t.Skipf("%s not set: no S3 service to test against", storage.EnvS3Endpoint)
	}
	return fmt.Sprintf("s3://rewind-microbatch-test/%s-%d", t.Name(), time.Now().UnixNano())
}

// TestS3Storage runs crash scenarios with durable storage on S3: a
// coordinator crash in the middle of the state write, a lost worker, a
// crash after the commit with a transactional sink, and retention.
func TestS3Storage(t *testing.T) {
	url := s3URL(t)
	for i, c := range []struct {
		job   string
		mode  sink.Mode
		fails []fault.Spec
	}{
		{"keyed-count", sink.Idempotent, []fault.Spec{{Worker: -1, Point: PointStateMidWrite, Occurrence: 3}, {Worker: 1, AfterRecords: 1500}}},
		{"windowed-sum", sink.Transactional, []fault.Spec{{Worker: -1, Point: PointAfterCommit, Occurrence: 2}, {Worker: -1, Point: PointMidRun, Occurrence: 7}}},
		{"join", sink.Append, []fault.Spec{{Worker: -1, Point: PointOffsetsMidWrite, Occurrence: 2}}},
	} {
		t.Run(c.job, func(t *testing.T) {
			sc := &scenario{job: c.job, inputs: defaultInputs(c.job, 3000, int64(i+1)), mode: c.mode, fails: c.fails,
				storage: fmt.Sprintf("%s/%d", url, i), ledger: newBatchLedger(),
				opts: Options{MaxBatchRecords: 400, RetainedBatches: 3, FullSnapshotEvery: 2}}
			o := sc.execute(t)
			checkCrashRun(t, c.job+" on S3", sc, o, true)
		})
	}
}
