package recordwise

import (
	"fmt"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestNoCrash runs every built-in job under every barrier setting and sink
// without faults: the resolved output equals the oracle's, with no
// duplicates at all.
func TestNoCrash(t *testing.T) {
	for _, j := range jobs {
		for _, m := range modes {
			for _, s := range sinks {
				t.Run(fmt.Sprintf("%s/%s/%s", j, m, s), func(t *testing.T) {
					sc := &scenario{job: j, barriers: m, mode: s}
					o := sc.execute(t)
					o.check(t, sc.String())
					if o.stats.DuplicateRows != 0 {
						t.Fatalf("%s: %d duplicates without a crash", sc, o.stats.DuplicateRows)
					}
					if o.summary.Checkpoints == nil || o.summary.Checkpoints.Completed == 0 {
						t.Fatalf("%s: no completed checkpoint: %+v", sc, o.summary.Checkpoints)
					}
				})
			}
		}
	}
}

func TestNoCrashParquet(t *testing.T) {
	sc := &scenario{job: "keyed-count", mode: sink.Transactional, format: sink.Parquet}
	sc.execute(t).check(t, sc.String())
}
