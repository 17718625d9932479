package recordwise

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
// REWIND_REQUIRE_S3=1 a missing endpoint fails instead.
func s3URL(t *testing.T) string {
	t.Helper()
	if os.Getenv(storage.EnvS3Endpoint) == "" {
		if os.Getenv("REWIND_REQUIRE_S3") == "1" {
			t.Fatalf("REWIND_REQUIRE_S3=1 but %s is not set", storage.EnvS3Endpoint)
		}
		t.Skipf("%s not set: no S3 service to test against", storage.EnvS3Endpoint)
	}
	return fmt.Sprintf("s3://rewind-recordwise-test/%d", time.Now().UnixNano())
}

// TestS3Storage runs crash scenarios with the recovery points on S3:
// unaligned in-flight data, a crash before the metadata (the previous
// recovery point is used), and retention.
func TestS3Storage(t *testing.T) {
	url := s3URL(t)
	for i, c := range []struct {
		job      string
		mode     sink.Mode
		barriers barrierSetting
		fails    []fault.Spec
	}{
		{"keyed-count", sink.Transactional, barrierSetting{"unaligned", 0}, []fault.Spec{kill(1, 3000), at(PointMidPartWrite, 5)}},
		{"windowed-sum", sink.Idempotent, barrierSetting{"aligned", 0}, []fault.Spec{at(PointAfterPartsBeforeMetadata, 2)}},
		{"join", sink.Append, barrierSetting{"aligned", time.Millisecond}, []fault.Spec{at(PointSinkBeforeCommit, 2), kill(0, 4000)}},
	} {
		t.Run(c.job, func(t *testing.T) {
			sc := &scenario{job: c.job, mode: c.mode, barriers: c.barriers, fails: c.fails,
				inputs: inputs(c.job, 6000, 100000, int64(i+1)), storage: fmt.Sprintf("%s/%d", url, i)}
			o := sc.execute(t)
			o.check(t, sc.String()+" on S3")
			if o.summary.Crashes == 0 || o.summary.Checkpoints.Completed == 0 {
				t.Fatalf("%s on S3: %d crashes, checkpoints %+v: the scenario did not exercise recovery", sc, o.summary.Crashes, o.summary.Checkpoints)
			}
		})
	}
}
