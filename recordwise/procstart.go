package recordwise

// This file is the start of recordwise's tasks in worker processes
// (issue #17, --workers process): the configuration a worker process
// takes from its coordinator's Welcome, and the worker's start-up up to
// "ready" (inputs and durable storage open, the same plan, placement and
// partition split as its coordinator's), which ends the measured acquire
// of a replacement. procworker.go runs its tasks.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
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
	// SinkMode is the sink's contract; the coordinator writes the rows
	// (procsink.go).
	SinkMode sink.Mode `json:"sink_mode"`
	// Placement is, per worker, what the coordinator's plan gives it
	// (plan.placementOf), and Partitions the source partitions its tasks
	// read: a worker whose job or inputs split otherwise refuses to start,
	// rather than run other tasks or read other offsets than planned. Every
	// worker gets the same Welcome, so a worker started by hand needs only
	// its id.
	Placement  [][]string `json:"placement"`
	Partitions [][]string `json:"partitions"`
	// TraceStart is, when the run is traced, the coordinator recorder's
	// start (Unix ns): the worker draws on a recorder of its own on the
	// same clock and forwards what it drew (proctrace.go). 0: not traced.
	TraceStart int64 `json:"trace_start,omitempty"`
	// AskPoints are the task points the run's faults name: a task asks
	// the coordinator at those, and passes the others (procpoints.go).
	AskPoints []string `json:"ask_points,omitempty"`
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
		SinkTaskRate: opts.sinkTaskRate, SinkMode: env.Sink.Mode()}
	if env.Trace != nil {
		cfg.TraceStart = env.Trace.Start().UnixNano()
	}
	cfg.AskPoints = askedPoints(env.Config.Fails)
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
	opts := &options{settings: Options{Barriers: cfg.Barriers, AlignmentTimeout: cfg.AlignmentTimeout, BufferTimeout: cfg.BufferTimeout},
		bufferRows: cfg.BufferRows, channelBuffers: cfg.ChannelBuffers, readRows: cfg.ReadRows, sinkTaskRate: cfg.SinkTaskRate}
	if cfg.TraceStart != 0 {
		env.Trace = spacetime.NewRecorder(time.Unix(0, cfg.TraceStart))
	}
	ok = true
	return &procWorker{cfg: cfg, id: w.ID, env: env, plan: pl, mode: mode, opts: opts, alloc: w.Alloc}, nil
}
