package diskphase

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// TestTraceGolden runs the small traced runs of testdata/trace and
// compares their time-space events, normalised (spacetime.Normalise),
// with the expectations. Rewrite them with -rewrite.
//
//	run job=keyed-count records=40 fail=point=unit.mid-write,worker=1
func TestTraceGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/trace", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			jobName, failSpec, records, par := "keyed-count", "", 40, 2
			d.MaybeScanArgs(t, "job", &jobName)
			d.MaybeScanArgs(t, "records", &records)
			d.MaybeScanArgs(t, "parallelism", &par)
			d.MaybeScanArgs(t, "fail", &failSpec)
			sc := &scenario{job: jobName, parallelism: par, spacetime: spacetime.NewRecorder(time.Now()),
				inputs: map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=%d,partitions=2,seed=1", records, records/4)}}
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
			if len(o.summary.UnfiredFaults) > 0 {
				d.Fatalf(t, "the crash did not fire: %v", o.summary.UnfiredFaults)
			}
			return spacetime.Normalise(sc.spacetime.Lanes(), sc.spacetime.Events())
		})
	})
}
