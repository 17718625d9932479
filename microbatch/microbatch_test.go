package microbatch

import (
	"fmt"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestMatchesOracleWithoutCrashes runs every built-in job under every sink
// mode, at parallelism 1 and 3, with small batches.
func TestMatchesOracleWithoutCrashes(t *testing.T) {
	for _, j := range job.Names() {
		for _, mode := range sink.Modes {
			for _, par := range []int{1, 3} {
				name := fmt.Sprintf("%s/%s/p%d", j, mode, par)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					sc := &scenario{job: j, inputs: defaultInputs(j, 4000, 7), mode: mode, parallelism: par,
						opts: Options{MaxBatchRecords: 700}}
					o := sc.execute(t)
					o.check(t, name)
					if o.stats.DuplicateRows != 0 {
						t.Fatalf("%d duplicates without a crash", o.stats.DuplicateRows)
					}
					if o.summary.Checkpoints.Completed < 5 {
						t.Fatalf("only %d batches committed; want several", o.summary.Checkpoints.Completed)
					}
				})
			}
		}
	}
}
