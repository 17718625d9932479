package run

// This file holds what every executor's worker process is told of its run,
// and how a worker process opens that run's job, inputs and storage.

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// WorkerRun is the part of a worker process's configuration that every
// executor sends in its Welcome: the job, the inputs (as ProcessInputs
// gives them) and the durable storage the coordinator uses. An executor
// embeds it in its own configuration, so its fields travel at the top
// level of that JSON.
type WorkerRun struct {
	Job                string            `json:"job"`
	Params             job.Params        `json:"params"`
	Inputs             map[string]string `json:"inputs"`
	Seed               int64             `json:"seed"`
	Storage            string            `json:"storage"`
	S3Endpoint         string            `json:"s3_endpoint,omitempty"`
	StorageTimeout     time.Duration     `json:"storage_timeout"`
	StorageOutageLimit time.Duration     `json:"storage_outage_limit"`
	RunID              string            `json:"run_id"`
}

// NewWorkerRun is env's run as its worker processes are told it: inputs
// are specs made fit for another process (ProcessInputs), runID the run's
// id.
func NewWorkerRun(env *Env, specs map[string]string, runID string) (WorkerRun, error) {
	inputs, err := ProcessInputs(specs, env.Sources)
	if err != nil {
		return WorkerRun{}, err
	}
	c := env.Config
	return WorkerRun{Job: c.Job, Params: c.Params, Inputs: inputs, Seed: c.Seed, Storage: env.Store.URL(),
		S3Endpoint: c.S3Endpoint, StorageTimeout: c.StorageTimeout, StorageOutageLimit: c.StorageOutageLimit,
		RunID: runID}, nil
}

// Open builds a worker process's Env for r at the given parallelism: its
// job, every input opened and the storage. The caller closes the Env
// (which closes the sources and the storage); on an error nothing stays
// open.
func (r WorkerRun) Open(ctx context.Context, parallelism int, w WorkerEnv) (*job.Job, *Env, error) {
	j, err := job.Build(r.Job, r.Params)
	if err != nil {
		return nil, nil, err
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	env := &Env{Config: Config{Job: r.Job, Params: r.Params, Inputs: r.Inputs, Storage: r.Storage,
		S3Endpoint: r.S3Endpoint, StorageTimeout: r.StorageTimeout, StorageOutageLimit: r.StorageOutageLimit,
		Parallelism: parallelism, Seed: r.Seed, RunID: r.RunID, Workers: WorkersProcess},
		Job: j, Sources: map[string]source.Source{}, Alloc: w.Alloc, Log: w.Log}
	ok := false
	defer func() {
		if !ok {
			_ = env.Close()
		}
	}()
	for n, spec := range r.Inputs {
		src, err := source.Open(spec, source.Options{DefaultSeed: r.Seed})
		if err != nil {
			return nil, nil, InputError{Input: n, Spec: spec, Err: err}
		}
		env.Sources[n] = src
	}
	if env.Store, err = storage.Open(ctx, r.Storage, storage.Options{Endpoint: r.S3Endpoint, CallTimeout: r.StorageTimeout}); err != nil {
		return nil, nil, err
	}
	ok = true
	return j, env, nil
}

// FleetConfig is the fleet of env's n worker processes serving executor
// with config: the run's worker command, allocator, log and
// --heartbeat-timeout.
func (e *Env) FleetConfig(executor string, config []byte, n int) FleetConfig {
	_, timeout := e.Config.Heartbeats()
	return FleetConfig{Executor: executor, Config: config, N: n, Command: e.WorkerCommand, Alloc: e.Alloc,
		Log: func(format string, args ...any) {
			if e.Log != nil {
				e.Log.Info(fmt.Sprintf(format, args...))
			}
		}, HeartbeatTimeout: timeout}
}
