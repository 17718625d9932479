package microbatch

// This file is the start of microbatch's workers as processes (issue #17,
// --workers process): the configuration a worker process takes from its
// coordinator's Welcome, and the worker's start-up up to "ready" (inputs
// and durable storage open, the same topology and partition ownership as
// its coordinator's), which ends the measured acquire of a replacement.
// What it serves after that is in procserve.go, the coordinator's side in
// procrun.go and procbatch.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// procConfig is a microbatch worker process's whole configuration, in the
// Welcome: what it needs to read its partitions and to restore and write
// its state versions against the same inputs and durable storage.
type procConfig struct {
	run.WorkerRun
	Parallelism     int   `json:"parallelism"`
	ReadBatchRows   int   `json:"read_batch_rows"`
	PrefetchRecords int64 `json:"prefetch_records"`
	// Partitions are the coordinator's partitions in global order, each
	// with its owner: a worker whose inputs split otherwise refuses to
	// start, rather than read other offsets than the ones planned.
	Partitions []string `json:"partitions"`
	// TraceStart is, when the run is traced, the coordinator recorder's
	// start (Unix ns): the worker draws its stages' batches on a recorder
	// of its own on that clock and sends them with its answers. 0: not
	// traced.
	TraceStart int64 `json:"trace_start,omitempty"`
}

// partitionNames names t's partitions in global order with their owners.
func partitionNames(t *topology) []string {
	out := make([]string, len(t.parts))
	for i, p := range t.parts {
		out[i] = p.input + "/" + p.name + "@" + strconv.Itoa(p.owner)
	}
	return out
}

// startWorkerProcesses starts the run's worker processes, one per worker,
// each given the configuration of this run.
func startWorkerProcesses(ctx context.Context, env *run.Env, opts *options, runID string) (*run.Fleet, error) {
	wr, err := run.NewWorkerRun(env, env.Config.Inputs, runID)
	if err != nil {
		return nil, err
	}
	topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
	if err != nil {
		return nil, err
	}
	pc := procConfig{WorkerRun: wr, Parallelism: opts.parallelism, ReadBatchRows: opts.readRows,
		PrefetchRecords: opts.prefetch, Partitions: partitionNames(topo)}
	if env.Trace != nil {
		pc.TraceStart = env.Trace.Start().UnixNano()
	}
	cfg, err := json.Marshal(pc)
	if err != nil {
		return nil, err
	}
	return run.StartFleet(ctx, env.FleetConfig(Executor{}.Name(), cfg, opts.parallelism))
}

// procWorker is what a worker process holds besides its operators: its
// configuration, inputs, durable storage, topology and connection.
type procWorker struct {
	cfg   procConfig
	id    int
	env   *run.Env
	topo  *topology
	store *storage.Counting // what a restore read is billed (reset's answer)
	conn  *wire.Conn
	peer  *rpcPeer
	// ctx ends when the connection does (serve).
	ctx context.Context
	// w holds the operators, their state and the readers, once restored:
	// memory that dies with this process.
	w     *worker
	inbox *inbox
	up    map[int]*wire.Sender // by stage
	// The direct links to the other workers (procmesh.go): the mesh,
	// every worker's address as the last begin gave them, a watcher per
	// other worker and the exchanges' sending ends.
	mesh  *wire.Mesh
	peers []string
	watch map[int]*peerWatch
	tx    map[txKey]*wire.Sender
	wg    sync.WaitGroup
	// The batch attempt in flight, and the state version being written.
	seq   int64
	bd    *batchData
	se    *stageEnv
	snaps []*stageSnap
	blobs map[string][]byte
}

// ServeWorker implements run.ProcessWorker: a microbatch worker process.
// It opens what its configuration names and says ready (or failed, with
// the reason), then serves its coordinator's requests (procserve.go)
// until the connection closes.
func (Executor) ServeWorker(ctx context.Context, c *wire.Conn, config json.RawMessage, w run.WorkerEnv) error {
	var cfg procConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("microbatch worker: the configuration is not one: %w", err)
	}
	pw, err := startWorkerSide(ctx, cfg, w)
	if err != nil {
		err = fmt.Errorf("microbatch worker %d: %w", w.ID, err)
		_ = run.SendFailed(c, err)
		return err
	}
	defer pw.env.Close()
	defer pw.drop()
	pw.conn, pw.peer, pw.inbox, pw.up = c, newRPCPeer(c), newInbox(), map[int]*wire.Sender{}
	pw.watch, pw.tx = map[int]*peerWatch{}, map[txKey]*wire.Sender{}
	if pw.mesh, err = run.OpenMesh(c, w); err != nil {
		_ = run.SendFailed(c, err)
		return err
	}
	defer pw.mesh.Close()
	if err := run.SendReadyAt(c, pw.mesh.Addr()); err != nil {
		return nil // the coordinator is gone already
	}
	return pw.serve(ctx)
}

// startWorkerSide opens a worker process's inputs and storage and builds
// its topology, from the configuration alone.
func startWorkerSide(ctx context.Context, cfg procConfig, w run.WorkerEnv) (*procWorker, error) {
	j, env, err := cfg.WorkerRun.Open(ctx, cfg.Parallelism, w)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = env.Close()
		}
	}()
	if cfg.Parallelism < 1 || w.ID >= cfg.Parallelism {
		return nil, fmt.Errorf("worker %d of a run with parallelism %d", w.ID, cfg.Parallelism)
	}
	topo, err := newTopology(j, env.Sources, cfg.Parallelism)
	if err != nil {
		return nil, err
	}
	if err := checkProcessTopology(topo); err != nil {
		return nil, err
	}
	if names := partitionNames(topo); !slices.Equal(names, cfg.Partitions) {
		return nil, fmt.Errorf("the inputs split into %v here, into %v at the coordinator", names, cfg.Partitions)
	}
	if cfg.ReadBatchRows < 1 || cfg.PrefetchRecords < 1 {
		return nil, fmt.Errorf("read batch rows %d and prefetch records %d must be positive", cfg.ReadBatchRows, cfg.PrefetchRecords)
	}
	ok = true
	if cfg.TraceStart != 0 {
		env.Trace = spacetime.NewRecorder(time.Unix(0, cfg.TraceStart))
	}
	return &procWorker{cfg: cfg, id: w.ID, env: env, topo: topo, store: storage.NewCounting(env.PatientStore().Store())}, nil
}
