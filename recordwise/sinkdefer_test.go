package recordwise

import (
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
)

// TestSinkTaskHoldsOutputWhileAFlushIsInFlight: while the sink's flush is
// in flight, the count's changes wait in the operator and each changed key
// is emitted once when the flusher is free, instead of once per input
// batch; the output is still the reference's.
//
// 40 source batches of 1,000 rows over 200 keys: emitted after every input
// batch, that is up to 40 × 200 = 8,000 rows (4,200–5,400 seen). Every
// flush here takes 100 ms longer than it would, so the run is a few
// flushes long and emits a few times 200 rows (400 seen).
func TestSinkTaskHoldsOutputWhileAFlushIsInFlight(t *testing.T) {
	const records, keys, batch = 40_000, 200, 1_000
	for _, m := range sinks {
		t.Run(string(m), func(t *testing.T) {
			sc := &scenario{job: "keyed-count", mode: m, parallelism: 1, interval: time.Hour,
				inputs: runtest.Gen{Records: records, Keys: keys, Seed: 1}.Inputs("keyed-count"),
				opts:   Options{ReadRows: batch, BufferRows: batch, hooks: testHooks{flushDelay: 100 * time.Millisecond}}}
			o := sc.execute(t)
			o.check(t, sc.String())
			perBatch := int64(records / batch * keys)
			if o.summary.RowsOut == 0 || o.summary.RowsOut > perBatch/4 {
				t.Fatalf("%s: %d rows handed to the sink, want at most %d (a quarter of one row per key per input batch, %d)",
					sc, o.summary.RowsOut, perBatch/4, perBatch)
			}
		})
	}
}
