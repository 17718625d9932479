package recordwise

import (
	"fmt"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestS3Storage runs crash scenarios with the recovery points on S3:
// unaligned in-flight data, a crash before the metadata (the previous
// recovery point is used), and retention.
func TestS3Storage(t *testing.T) {
	url := runtest.S3URL(t, "rewind-recordwise-test")
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
