//go:build unix

package recordwise

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
	return run.Config{Job: "keyed-count", Params: job.DefaultParams, Executor: "recordwise",
		Options: Options{Barriers: "aligned", CheckpointInterval: 20 * time.Millisecond, BufferTimeout: time.Millisecond,
			CheckpointTimeout: time.Second, RetainedCheckpoints: 2},
		Inputs: inputs("keyed-count", 4000, 4000, 1), OutputFormat: sink.CSV, SinkMode: sink.Transactional,
		Parallelism: 2, Seed: 1}
}

// TestStorageFrozenDuringCheckpoint: storage stops answering as a worker
// writes its part of a checkpoint. The checkpoint fails (its writes end at
// the call deadline; the checkpoint timeout alone could not end them while
// the coordinator waited on storage), the failure is logged, later
// checkpoints retry, and the run completes equal to the oracle once storage
// answers; a longer freeze fails the run with a clear error after the
// limit. Before the deadlines the run hung for as long as the server was
// frozen, with nothing logged, whatever --checkpoint-timeout said.
func TestStorageFrozenDuringCheckpoint(t *testing.T) {
	runtest.CheckStorageStall(t, Executor{}, stallConfig(), nil, func(op, name string) bool {
		return op == "put" && strings.Contains(name, "/op-")
	}, func(t *testing.T, o runtest.Outcome) {
		if cs := o.Summary.Checkpoints; cs.Failed+cs.Aborted == 0 {
			t.Fatalf("no checkpoint failed while storage was frozen: %+v", cs)
		}
	})
}

// TestStorageFrozenDuringRestore: a process stopped after its first
// complete checkpoint, and one resuming its run whose storage stops
// answering at the first read of its restore.
func TestStorageFrozenDuringRestore(t *testing.T) {
	cfg := stallConfig()
	cfg.RunID, cfg.Resumed = "stalled-restore", true
	first := func(t *testing.T, cfg run.Config, open func() storage.Store) {
		cfg.Resumed = false
		runtest.StallRunUntil(t, Executor{}, cfg, open(), 1, `"event":"checkpoint"`, `"status":"completed"`)
	}
	runtest.CheckStorageStall(t, Executor{}, cfg, first, func(op, name string) bool {
		return op == "get" || op == "list"
	})
}
