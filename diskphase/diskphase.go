package diskphase

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Executor is the disk-phase executor (--executor diskphase). The zero
// value is the CLI's configuration; the fields exist for tests and
// benchmarks.
type Executor struct {
	// RunID names the run's namespace in durable storage; an earlier run's
	// id resumes it. Empty: run.Config.RunID, else a new id per Run.
	RunID string
	// Compression of materialised files; empty means none on a local
	// directory and snappy on S3 (see defaultCompressionFor).
	Compression Compression
	// ReadBatchRows is the most rows a map unit asks its source for at a
	// time; 0 means DefaultReadBatchRows.
	ReadBatchRows int

	// trace, when set (by tests), sees every unit attempt, crash and commit.
	trace func(traceEvent)
	// result, when set (by tests), receives the execution before it runs.
	result func(*execution)
	// heartbeatTimeout, when set (by tests), replaces --heartbeat-timeout
	// (run.Config.Heartbeats).
	heartbeatTimeout time.Duration
}

// DefaultReadBatchRows is how many rows a map unit reads at a time.
const DefaultReadBatchRows = 16 * 1024

// Name implements run.Executor.
func (Executor) Name() string { return "diskphase" }

// Traits implements run.Executor: the first recovery point is durable
// once the first finite job commits.
func (Executor) Traits() run.Traits {
	return run.Traits{Flags: []string{"job-records", "job-interval", "lost-piece-recovery", "detect-delay", "acquire-delay"},
		FirstDurablePoint: pointAfterCommit, NoOptions: Options{}, ProcessWorkers: true,
		ProcessTrace: true}
}

// FailPoints implements run.Executor.
func (Executor) FailPoints() []string { return append([]string(nil), failPoints...) }

// Workers implements run.Executor: one worker per reduce partition.
func (Executor) Workers(cfg run.Config) int { return max(cfg.Parallelism, 1) }

// Run implements run.Executor.
func (e Executor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	x, err := e.prepare(env)
	if err != nil {
		return nil, fmt.Errorf("diskphase: %w", err)
	}
	if err := env.AttachDestination(ctx, x.names.root); err != nil {
		x.closeShared()
		return nil, fmt.Errorf("diskphase: %w", err)
	}
	if env.Config.Workers == run.WorkersProcess {
		if x.procs, err = x.startWorkers(ctx, x.mcfg.workers, e.heartbeatTimeout); err != nil {
			x.closeShared()
			var re run.RefusedError
			if errors.As(err, &re) {
				return nil, err
			}
			return nil, fmt.Errorf("diskphase: %w", err)
		}
		defer x.procs.Close()
	}
	if e.result != nil {
		e.result(x)
	}
	err = x.runCoordinators(ctx)
	x.closeShared()
	if x.procs != nil {
		x.met.notes = append(x.met.notes, fmt.Sprintf("workers ran as processes of this binary (--workers process): %d incarnations, replacements included; a worker's detect and acquire are measured", x.procs.Started()))
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// Stopped from outside (an endless input): every committed
			// finite job is complete, the rest is simply not done.
			return x.summary(), nil
		}
		return nil, fmt.Errorf("diskphase: %w", err)
	}
	return x.summary(), nil
}

// summary folds the lost-piece figures (rebuild.go) into the metrics'.
func (x *execution) summary() *report.Summary {
	s := x.met.summary()
	s.LostPieces = x.lost.summary()
	if x.procs != nil {
		// Its units exchange nothing between workers: storage carries it all.
		s.Workers = &report.WorkerProcesses{Started: x.procs.Started()}
	}
	return s
}

// prepare validates the configuration and builds the execution.
func (e Executor) prepare(env *run.Env) (*execution, error) {
	cfg := env.Config
	opts, _ := cfg.Options.(Options)
	if env.Store == nil {
		return nil, errors.New("no durable storage (--storage): disk-phase materialises every phase there")
	}
	topo, err := compile(env.Job)
	if err != nil {
		return nil, err
	}
	splits, err := topo.splitsOf(env.Sources)
	if err != nil {
		return nil, err
	}
	p := max(cfg.Parallelism, 1)
	if p > 128 {
		return nil, fmt.Errorf("parallelism %d: at most 128 (keyed state has 128 key groups)", p)
	}
	comp := e.Compression
	if comp == "" {
		comp = defaultCompressionFor(env.Store.URL())
	}
	if _, err := comp.codec(); err != nil {
		return nil, err
	}
	readBatch := e.ReadBatchRows
	if readBatch <= 0 {
		readBatch = DefaultReadBatchRows
	}
	chunkRows := opts.ChunkRows
	if chunkRows <= 0 {
		chunkRows = DefaultChunkRows
	}
	runID := cmp.Or(e.RunID, env.Config.RunID, run.NewRunID())
	env.Config.RunID = runID // what run.Execute reports as run_id
	if runID == "" || strings.ContainsAny(runID, "/\\ ") || strings.HasPrefix(runID, ".") {
		return nil, fmt.Errorf("run id %q: use letters, digits, '-' and '_'", runID)
	}
	plan := RunPlan{Job: env.Job.Name, Inputs: cfg.Inputs, Parallelism: p, MapOnly: topo.mapOnly(),
		MaxDisorder: env.Job.Params.MaxDisorder, SinkMode: string(env.Sink.Mode())}
	if plan.Inputs == nil {
		plan.Inputs = map[string]string{}
		for n, s := range env.Sources {
			plan.Inputs[n] = s.Spec()
		}
	}
	ports := make([]int, len(splits))
	for i, s := range splits {
		plan.Splits = append(plan.Splits, topo.inputs[s.input].name+"/"+s.name)
		ports[i] = topo.inputs[s.input].port
	}
	switch {
	case opts.JobRecords > 0 && opts.JobInterval > 0:
		return nil, errors.New("set one of --job-records and --job-interval, not both")
	case opts.JobRecords > 0:
		plan.Mode = modeRecords
		n := int64(len(splits))
		plan.PerSplit = (opts.JobRecords + n - 1) / n
	case opts.JobInterval > 0:
		if opts.JobInterval < time.Millisecond {
			return nil, fmt.Errorf("--job-interval %s: at least 1ms", opts.JobInterval)
		}
		plan.Mode = modeInterval
		plan.IntervalMs = opts.JobInterval.Milliseconds()
	default:
		plan.Mode = modeWhole
		for name, src := range env.Sources {
			if !src.Bounded() {
				return nil, fmt.Errorf("input %s (%s) is endless: give --job-records or --job-interval so it is processed as a sequence of finite jobs", name, src.Spec())
			}
		}
	}
	counted := storage.NewCounting(env.PatientStore().Store())
	met := newMetrics(cfg.Progress, env.Begin())
	met.series = env.Series
	x := &execution{
		env: env, store: counted, counted: counted, topo: topo, splits: splits, plan: plan, compression: comp, readBatch: readBatch, chunkRows: chunkRows,
		names: newNames(env.Job.Name, runID), met: met, handover: newHandoverLog(),
		trace: e.trace,
		mcfg: machineConfig{splits: len(splits), ports: ports, parallelism: p, workers: p, mapOnly: topo.mapOnly(),
			stateful: topo.stateful, mode: plan.Mode, perSplit: plan.PerSplit, maxDisorder: plan.MaxDisorder},
	}
	declareLanes(env.Trace, p)
	if cfg.Resumed {
		x.processDied = x.met.processDied()
	}
	for name, src := range env.Sources {
		if !src.Rereadable() {
			x.met.notes = append(x.met.notes, fmt.Sprintf("input %s is forgetful: a map unit re-run after a crash cannot read again what its dead attempt consumed; lost records are counted", name))
		}
	}
	return x, nil
}
