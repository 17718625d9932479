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
	inputs, err := run.ProcessInputs(x.plan.Inputs, x.env.Sources)
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(procConfig{Job: x.env.Config.Job, Params: x.env.Config.Params, Inputs: inputs,
		Seed: x.env.Config.Seed, Storage: x.env.Store.URL(), S3Endpoint: x.env.Config.S3Endpoint,
		StorageTimeout: x.env.Config.StorageTimeout, StorageOutageLimit: x.env.Config.StorageOutageLimit,
		RunID: x.env.Config.RunID, Plan: x.plan, Compression: x.compression, ReadBatch: x.readBatch})
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
