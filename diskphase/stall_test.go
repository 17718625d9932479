//go:build unix

package diskphase

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestStorageFrozenDuringUnitWrite: storage stops answering as a map unit
// writes its first materialised file. The unit waits, with the wait
// logged, and finishes once storage answers; a longer freeze fails the run
// with a clear error instead of hanging.
func TestStorageFrozenDuringUnitWrite(t *testing.T) {
	cfg := run.Config{Job: "keyed-count", Params: job.DefaultParams, Executor: "diskphase",
		Inputs: smallInputs("keyed-count", 3000, 1), OutputFormat: sink.Parquet, SinkMode: sink.Idempotent,
		Parallelism: 2, Options: Options{JobRecords: 1000}, Seed: 1}
	runtest.CheckStorageStall(t, Executor{}, cfg, nil, func(op, name string) bool {
		return op == "put" && strings.Contains(name, "/map/") && strings.HasSuffix(name, ".parquet")
	})
}
