package microbatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// TestTraceGolden runs the small traced runs of testdata/trace (even
// plans of batch-records records, so the seams are fixed) and compares
// their time-space events, normalised (spacetime.Normalise), with the
// expectations. Rewrite them with -rewrite.
//
//	run job=etl records=40 batch-records=10 recovery=lineage fail=point=batch.mid-run,worker=1,occurrence=2
func TestTraceGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/trace", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			jobName, recovery, failSpec := "etl", RecoveryLineage, ""
			records, batch := 40, 10
			d.MaybeScanArgs(t, "job", &jobName)
			d.MaybeScanArgs(t, "records", &records)
			d.MaybeScanArgs(t, "batch-records", &batch)
			d.MaybeScanArgs(t, "recovery", &recovery)
			d.MaybeScanArgs(t, "fail", &failSpec)
			sc := &scenario{job: jobName, mode: sink.Idempotent, parallelism: 2, trace: spacetime.NewRecorder(time.Now()),
				inputs: map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=%d,partitions=2,seed=1", records, records/4)},
				opts:   Options{MaxBatchRecords: int64(batch), LostPieceRecovery: recovery, hooks: testHooks{evenPlans: true}}}
			if failSpec != "" {
				sp, err := fault.Parse(failSpec)
				if err != nil {
					d.Fatalf(t, "fail=%s: %v", failSpec, err)
				}
				sc.fails = []fault.Spec{sp}
			}
			o := sc.execute(t)
			if o.err != nil {
				d.Fatalf(t, "%v", o.err)
			}
			o.result().Judge(t, jobName)
			if len(o.summary.UnfiredFaults) > 0 {
				d.Fatalf(t, "the crash did not fire: %v", o.summary.UnfiredFaults)
			}
			return spacetime.Normalise(sc.trace.Lanes(), sc.trace.Events(), spacetime.PieceLost, spacetime.PieceRebuilt)
		})
	})
}
