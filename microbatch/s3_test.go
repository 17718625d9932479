package microbatch

import (
	"fmt"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestS3Storage runs crash scenarios with durable storage on S3: a
// coordinator crash in the middle of the state write, a lost worker, a
// crash after the commit with a transactional sink, and retention.
func TestS3Storage(t *testing.T) {
	url := runtest.S3URL(t, "rewind-microbatch-test")
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
