//go:build unix

package microbatch

import (
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

func stallConfig() run.Config {
	return run.Config{Job: "keyed-count", Params: job.Params{Window: 50, JoinWindow: 200}, Executor: "microbatch",
		Inputs: defaultInputs("keyed-count", 3000, 1), OutputFormat: sink.Parquet, SinkMode: sink.Idempotent,
		Parallelism: 2, Options: Options{Trigger: time.Millisecond, MaxBatchRecords: 400}, Seed: 1}
}

// TestStorageFrozenDuringBatchCommit: storage stops answering as the
// third batch writes its commit entry. The batch waits, with the wait
// logged, and commits once storage answers; a longer freeze fails the run
// with a clear error. Before the deadlines the run hung for as long as the
// server was frozen.
func TestStorageFrozenDuringBatchCommit(t *testing.T) {
	runtest.CheckStorageStall(t, Executor{}, stallConfig(), nil, func(op, name string) bool {
		return op == "put" && strings.HasSuffix(name, commitName(2))
	})
}

// TestStorageFrozenDuringRestore: a process stopped after a few batches,
// and one resuming its run whose storage stops answering at the first read
// of its restore. Under make soak only: recordwise's restore test covers
// the moment in make test.
func TestStorageFrozenDuringRestore(t *testing.T) {
	runtest.SoakOnly(t)
	cfg := stallConfig()
	cfg.RunID, cfg.Resumed = "stalled-restore", true
	first := func(t *testing.T, cfg run.Config, open func() storage.Store) {
		cfg.Resumed = false
		runtest.StallRunUntil(t, Executor{}, cfg, open(), 3, `"event":"batch"`)
	}
	runtest.CheckStorageStall(t, Executor{}, cfg, first, func(op, name string) bool {
		return op == "get" || op == "list"
	})
}

// TestStorageLatency: storage slowed by a proxy, within the call deadline
// and then for a spell beyond it from the third batch's commit: the run
// completes equal to the oracle, and logs an outage only for the spell.
// Under make soak only: dataflow/storage's TestS3SlowButMovingCalls covers
// latency in make test.
func TestStorageLatency(t *testing.T) {
	runtest.SoakOnly(t)
	runtest.CheckStorageLatency(t, Executor{}, stallConfig(), func(op, name string) bool {
		return op == "put" && strings.HasSuffix(name, commitName(2))
	})
}
