package diskphase

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// startWorkers starts the run's n worker processes (--workers process),
// one per worker slot of the machine, with the run's shared fleet: they
// outlive a coordinator's crash, and a dead one is replaced by a fresh
// process. heartbeatTimeout, if set, replaces --heartbeat-timeout.
func (x *execution) startWorkers(ctx context.Context, n int, heartbeatTimeout time.Duration) (*run.Fleet, error) {
	wr, err := run.NewWorkerRun(x.env, x.plan.Inputs, x.env.Config.RunID)
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(procConfig{WorkerRun: wr, Plan: x.plan, Compression: x.compression, ReadBatch: x.readBatch, ChunkRows: x.chunkRows})
	if err != nil {
		return nil, err
	}
	fc := x.env.FleetConfig(Executor{}.Name(), cfg, n)
	if heartbeatTimeout > 0 {
		fc.HeartbeatTimeout = heartbeatTimeout
	}
	return run.StartFleet(ctx, fc)
}

// maxLost is how many worker processes may die on their own in one run
// before it fails (run.FleetMaxLost).
const maxLost = run.FleetMaxLost
