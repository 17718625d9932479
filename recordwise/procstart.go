package recordwise

// This file is the start of recordwise's tasks in worker processes
// (issue #17, --workers process): the configuration a worker process
// takes from its coordinator's Welcome, and the worker's start-up up to
// "ready" (inputs and durable storage open, the same plan, placement and
// partition split as its coordinator's), which ends the measured acquire
// of a replacement. Running the tasks in it is not built yet, so
// Traits.ProcessWorkers stays false and `--workers process` is refused;
// docs/workers.md says what is left.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/barrier"
)

// procConfig is a recordwise worker process's whole configuration, in the
// Welcome: the run (job, inputs, storage, run id), the settings its tasks
// use, and what the coordinator expects it to run.
type procConfig struct {
	run.WorkerRun
	Parallelism int `json:"parallelism"`
	Workers     int `json:"workers"`
	// The task settings: the barrier mode and the channels' buffers.
	Barriers         string        `json:"barriers"`
	AlignmentTimeout time.Duration `json:"alignment_timeout"`
	BufferRows       int           `json:"buffer_rows"`
	ChannelBuffers   int           `json:"channel_buffers"`
	ReadRows         int           `json:"read_rows"`
	BufferTimeout    time.Duration `json:"buffer_timeout"`
	SinkTaskRate     float64       `json:"sink_task_rate,omitempty"`
	// Placement is, per worker, what the coordinator's plan gives it
	// (plan.placementOf), and Partitions the source partitions its tasks
	// read: a worker whose job or inputs split otherwise refuses to start,
	// rather than run other tasks or read other offsets than planned. Every
	// worker gets the same Welcome, so a worker started by hand needs only
	// its id.
	Placement  [][]string `json:"placement"`
	Partitions [][]string `json:"partitions"`
}

// partitionsOf names the source partitions worker w of n reads, as
// input/partition@subtask, in plan order: partition k of an input goes to
// subtask k mod parallelism (openSourceHead).
func (pl *plan) partitionsOf(sources map[string]source.Source, w, n int) ([]string, error) {
	var out []string
	for _, c := range pl.chains {
		if c.source == nil {
			continue
		}
		src, ok := sources[c.source.Input]
		if !ok {
			return nil, fmt.Errorf("job %s needs input %q, which was not given", pl.job.Name, c.source.Input)
		}
		for k, name := range src.Partitions() {
			sub := k % pl.parallelism
			if workerOf(sub, n) == w {
				out = append(out, c.source.Input+"/"+name+"@"+strconv.Itoa(sub))
			}
		}
	}
	return out, nil
}

// workerConfig is the Welcome configuration of the n workers of a run.
func workerConfig(env *run.Env, opts *options, pl *plan, runID string, n int) (procConfig, error) {
	if err := pl.checkWorkers(n); err != nil {
		return procConfig{}, err
	}
	wr, err := run.NewWorkerRun(env, env.Config.Inputs, runID)
	if err != nil {
		return procConfig{}, err
	}
	s := opts.settings
	cfg := procConfig{WorkerRun: wr, Parallelism: pl.parallelism, Workers: n,
		Barriers: s.Variant(), AlignmentTimeout: s.AlignmentTimeout, BufferRows: opts.bufferRows,
		ChannelBuffers: opts.channelBuffers, ReadRows: opts.readRows, BufferTimeout: s.BufferTimeout,
		SinkTaskRate: opts.sinkTaskRate}
	for w := range n {
		parts, err := pl.partitionsOf(env.Sources, w, n)
		if err != nil {
			return procConfig{}, err
		}
		cfg.Placement = append(cfg.Placement, pl.placementOf(w, n))
		cfg.Partitions = append(cfg.Partitions, parts)
	}
	return cfg, nil
}

// startWorkerProcesses starts the n worker processes of a run, each given
// its whole configuration in the Welcome.
func startWorkerProcesses(ctx context.Context, env *run.Env, opts *options, pl *plan, runID string, n int) (*run.Fleet, error) {
	cfg, err := workerConfig(env, opts, pl, runID, n)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return run.StartFleet(ctx, env.FleetConfig(Executor{}.Name(), b, n))
}

// procWorker is what a recordwise worker process holds: its
// configuration, inputs, durable storage and plan. Its tasks, once they
// run here, are memory that dies with this process.
type procWorker struct {
	cfg   procConfig
	id    int
	env   *run.Env
	plan  *plan
	mode  barrier.Mode
	store storage.Store
}

// procMsg is a control message between a recordwise coordinator and a
// worker process; op says what it is.
type procMsg struct {
	Op   string `json:"op"`
	Text string `json:"text,omitempty"`
}

const opError = "error"

// ServeWorker implements run.ProcessWorker: a recordwise worker process.
// It opens what its configuration names and says ready (or failed, with
// the reason). Tasks are not run in worker processes yet: any request is
// answered with an error saying so. It returns when the connection
// closes.
func (Executor) ServeWorker(ctx context.Context, c *wire.Conn, config json.RawMessage, w run.WorkerEnv) error {
	var cfg procConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("recordwise worker: the configuration is not one: %w", err)
	}
	pw, err := startWorkerSide(ctx, cfg, w)
	if err != nil {
		err = fmt.Errorf("recordwise worker %d: %w", w.ID, err)
		_ = run.SendFailed(c, err)
		return err
	}
	defer pw.env.Close()
	if err := run.SendReady(c); err != nil {
		return nil // the coordinator is gone already
	}
	for {
		b, err := c.Control(ctx)
		if err != nil {
			return nil // the run is over, or the coordinator is gone
		}
		var m procMsg
		reply := procMsg{Op: opError}
		if err := json.Unmarshal(b, &m); err != nil {
			reply.Text = fmt.Sprintf("recordwise worker %d: a control message that is not one: %v", w.ID, err)
		} else {
			reply.Text = fmt.Sprintf("recordwise worker %d: %q: worker processes do not run tasks yet", w.ID, m.Op)
		}
		msg, err := json.Marshal(reply)
		if err != nil {
			return err
		}
		if err := c.SendControl(msg); err != nil {
			return nil
		}
	}
}

// startWorkerSide opens a worker process's inputs and storage and builds
// its plan, from the configuration alone, and checks that it runs what
// its coordinator placed on it.
func startWorkerSide(ctx context.Context, cfg procConfig, w run.WorkerEnv) (*procWorker, error) {
	if cfg.Workers < 1 || w.ID < 0 || w.ID >= cfg.Workers || len(cfg.Placement) != cfg.Workers || len(cfg.Partitions) != cfg.Workers {
		return nil, fmt.Errorf("worker %d of a run with %d workers and placements for %d", w.ID, cfg.Workers, len(cfg.Placement))
	}
	mode, err := barrier.ParseMode(cfg.Barriers, cfg.AlignmentTimeout)
	if err != nil {
		return nil, err
	}
	if cfg.BufferRows < 1 || cfg.ChannelBuffers < 1 || cfg.ReadRows < 1 || cfg.SinkTaskRate < 0 {
		return nil, fmt.Errorf("buffer rows %d, channel buffers %d, read rows %d, sink rate %g: the counts must be positive, the rate not negative",
			cfg.BufferRows, cfg.ChannelBuffers, cfg.ReadRows, cfg.SinkTaskRate)
	}
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
	pl, err := buildPlan(j, cfg.Parallelism)
	if err != nil {
		return nil, err
	}
	if err := pl.checkWorkers(cfg.Workers); err != nil {
		return nil, err
	}
	if got := pl.placementOf(w.ID, cfg.Workers); !slices.Equal(got, cfg.Placement[w.ID]) {
		return nil, fmt.Errorf("the plan places %q here, %q at the coordinator", got, cfg.Placement[w.ID])
	}
	parts, err := pl.partitionsOf(env.Sources, w.ID, cfg.Workers)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(parts, cfg.Partitions[w.ID]) {
		return nil, fmt.Errorf("the inputs split into %v here, into %v at the coordinator", parts, cfg.Partitions[w.ID])
	}
	ok = true
	return &procWorker{cfg: cfg, id: w.ID, env: env, plan: pl, mode: mode, store: env.PatientStore().Store()}, nil
}
