package recordwise

import (
	"fmt"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestWorkerKillRolling: a worker killed mid-run with an append sink that
// rolls in-progress files (the kill lands between flushes and their roll)
// still reaches the oracle's output, for every job and barrier setting.
func TestWorkerKillRolling(t *testing.T) {
	for _, j := range jobs {
		for _, m := range modes {
			t.Run(fmt.Sprintf("%s/%s/append-rolling", j, m), func(t *testing.T) {
				sc := &scenario{job: j, barriers: m, mode: sink.Append, roll: sink.RollPolicy{Age: 5 * time.Millisecond},
					inputs: inputs(j, 6000, 100000, 3), fails: []fault.Spec{kill(1, 3500)}}
				o := sc.execute(t)
				o.check(t, sc.String())
				if o.summary.Crashes != 1 {
					t.Fatalf("%s: %d crashes, want 1", sc, o.summary.Crashes)
				}
			})
		}
	}
}
