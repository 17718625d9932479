package diskphase

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// startWorkers starts the run's n worker processes (--workers process),
// one per worker slot of the machine, with the run's shared fleet: they
// outlive a coordinator's crash, and a dead one is replaced by a fresh
// process.
func (x *execution) startWorkers(ctx context.Context, n int, heartbeatTimeout time.Duration) (*run.Fleet, error) {
	wr, err := run.NewWorkerRun(x.env, x.plan.Inputs, x.env.Config.RunID)
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(procConfig{WorkerRun: wr, Plan: x.plan, Compression: x.compression, ReadBatch: x.readBatch})
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if x.env.Log != nil {
			x.env.Log.Info(fmt.Sprintf(format, args...))
		}
	}
	return run.StartFleet(ctx, run.FleetConfig{Executor: Executor{}.Name(), Config: cfg, N: n,
		Command: x.env.WorkerCommand, Alloc: x.env.Alloc, Log: logf, HeartbeatTimeout: heartbeatTimeout})
}

// maxLost is how many worker processes may die on their own in one run
// before it fails (run.FleetMaxLost).
const maxLost = run.FleetMaxLost
