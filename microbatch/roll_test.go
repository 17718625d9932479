package microbatch

import (
	"fmt"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestCrashAtEveryPointRolling: an append sink that rolls in-progress
// files (a roll age a few batches long, so crashes land between a flush
// and its roll) reaches the oracle's output after a crash at every point.
func TestCrashAtEveryPointRolling(t *testing.T) {
	for pi, point := range failPoints {
		name := fmt.Sprintf("%s/keyed-count/append-rolling", point)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			par := 2
			fails := []fault.Spec{{Worker: -1, Point: point, Occurrence: occurrenceFor(point, 2, par)}}
			sc := &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", 3000, int64(31+pi)), mode: sink.Append,
				roll: sink.RollPolicy{Age: 5 * time.Millisecond}, parallelism: par, fails: fails, opts: Options{MaxBatchRecords: 500}}
			o := sc.execute(t)
			checkCrashRun(t, name, sc, o, true)
		})
	}
}
