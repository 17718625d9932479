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
			// noPlanAhead: planning batch N+1 while N commits is a race
			// between two coordinator events the golden keeps in order.
			sc := &scenario{job: jobName, mode: sink.Idempotent, parallelism: 2, trace: spacetime.NewRecorder(time.Now()),
				inputs: map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=%d,partitions=2,seed=1", records, records/4)},
				opts:   Options{MaxBatchRecords: int64(batch), LostPieceRecovery: recovery, hooks: testHooks{evenPlans: true, noPlanAhead: true}}}
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

// TestReprocessedCountsTheReadAhead: a worker killed as its readers read
// ahead (between batches, or inside one) has that input read again by its
// replacement, and the recovery bills at least those records: everything
// read beyond the input, which only the crash made anyone read twice.
func TestReprocessedCountsTheReadAhead(t *testing.T) {
	for _, recovery := range []string{RecoveryLineage, RecoveryRerunBatch} {
		sc := &scenario{job: "keyed-count", mode: sink.Idempotent, parallelism: 2,
			inputs: map[string]string{job.DefaultInput: "gen:records=4000,keys=8,partitions=2,rate=20000,seed=1"},
			fails:  []fault.Spec{{Worker: 1, AfterRecords: 2000}},
			opts:   Options{LostPieceRecovery: recovery, Trigger: 20 * time.Millisecond}}
		o := sc.execute(t)
		if o.err != nil {
			t.Fatalf("%s: %v", recovery, o.err)
		}
		o.result().Judge(t, recovery)
		reread := o.summary.RecordsIn - 4000
		if len(o.summary.Recoveries) != 1 || o.summary.Recoveries[0].ReprocessedRecords == nil {
			t.Fatalf("%s: recoveries %+v, want one with its reprocessed records", recovery, o.summary.Recoveries)
		}
		if got := *o.summary.Recoveries[0].ReprocessedRecords; reread <= 0 || got < reread {
			t.Errorf("%s: %d records read of a 4000-record input, but %d billed as reprocessed", recovery, o.summary.RecordsIn, got)
		}
	}
}
