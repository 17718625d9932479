package microbatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// Defaults of the settings the CLI does not expose yet. They are variables
// so tests and embedding programs can change them.
var (
	// DefaultMaxBatchRecords caps the input records of one batch
	// (--max-batch-records); 0 means no cap beyond what the readers hold.
	DefaultMaxBatchRecords int64 = 0
	// DefaultRetainedBatches is how many offsets and commit entries are
	// kept (--retained-batches), and the state versions they need.
	DefaultRetainedBatches = 10
	// DefaultFullSnapshotEvery: a state version is a full snapshot when the
	// last full one is at least this many batches old; the others are
	// deltas (--full-snapshot-every).
	DefaultFullSnapshotEvery = 10
	// DefaultPrefetchRecords is how many records each partition's reader
	// holds ahead of the batches before it pauses.
	DefaultPrefetchRecords int64 = 1 << 18
	// DefaultReadBatchRows is the row limit of one source read.
	DefaultReadBatchRows = 8192
)

// Options are the microbatch settings. The CLI's flags arrive as
// run.Config.Options; an Executor's own Options win over them field by
// field. The zero value uses the defaults above.
type Options struct {
	// MaxBatchRecords caps the input records of one batch (0: default).
	MaxBatchRecords int64
	// RetainedBatches is how many batches of log entries to keep (0:
	// default).
	RetainedBatches int
	// FullSnapshotEvery is the distance between full state snapshots (0:
	// default).
	FullSnapshotEvery int
	// RunID names the run's namespace in durable storage; an earlier run's
	// id resumes it. Empty: run.Config.RunID, else a new id per Run.
	RunID string
	// PrefetchRecords and ReadBatchRows tune the readers (0: default).
	PrefetchRecords int64
	ReadBatchRows   int
	// Trigger is the time between batches (--trigger). 0 here and in
	// the flags runs them back to back: each batch is planned as soon as
	// the one before it is sealed, and an idle source is polled every
	// IdlePoll.
	Trigger time.Duration
	// IdleBatches runs a batch at every trigger even when there is no new
	// input (to measure the fixed cost of a batch).
	IdleBatches bool
	// MaxBatches stops the run after this many committed batches (0: no
	// limit).
	MaxBatches int
	// LostPieceRecovery says how a worker lost while a batch runs is
	// repaired: RecoveryLineage (rebuild only its stateless pieces, see
	// lineage.go) or RecoveryRerunBatch (roll back and re-run the batch).
	// Empty: RecoveryLineage.
	LostPieceRecovery string

	hooks testHooks
}

// testHooks are knobs only this package's tests set.
type testHooks struct {
	// lateOffsets is the deliberately broken protocol: offsets/N is logged
	// after the batch has run and reached the sink.
	lateOffsets bool
	// noRestart returns a coordinator crash from Run instead of starting a
	// new coordinator, like a process that died for good.
	noRestart bool
	// onRun sees the positions of every batch attempt.
	onRun func(e offsetsEntry, rerun bool)
	// onTick sees every trigger the coordinator feeds its machine.
	onTick func()
	// onRetained sees every background retention pass that completed,
	// with the last committed batch it kept to.
	onRetained func(committed int64)
	// serialSeal runs the sink flush, then the state objects, then the
	// manifest, each after the previous one, and noPlanAhead never plans a
	// batch before the previous one is committed: the executor as it was
	// before both. Benchmarks measure against them.
	serialSeal, noPlanAhead bool
	// fullAfterDeltas is how many times the state's size the deltas since
	// the last full snapshot may add up to before the next one (0: once).
	// Tests of long delta chains raise it.
	fullAfterDeltas int64
	// fullPieceBytes, when set, replaces fullPieceBytes (fullpieces.go):
	// tests make small states write their full versions in pieces.
	fullPieceBytes int64
	// evenPlans plans a batch only once every partition not at its end
	// holds its even share of MaxBatchRecords beyond the batch before, so
	// every batch takes a piece of every partition whatever the readers'
	// timing (tests that kill a worker must find it holding pieces).
	evenPlans bool
	// beforeSourceWait is called by worker w's subtask of a source stage
	// before it waits for the batch's input; stop is closed when w is
	// killed. A test that blocks in it until the kill makes a worker kill
	// land inside the stage loop, while the batch holds pieces of the
	// worker, instead of wherever the readers' timing puts it.
	beforeSourceWait func(worker int, stop <-chan struct{})
	// onRepair is called by a worker repair at stage "scan" (before it
	// looks for the dead workers) and "replaced" (once the replacements
	// are in place), with a function that kills a worker: tests land a
	// kill exactly there.
	onRepair func(stage string, kill func(worker int))
	// onProcs sees the run's worker processes once they are started.
	onProcs func(*procRun)
}

// midRepair calls onRepair, if set.
func (h testHooks) midRepair(stage string, kill func(worker int)) {
	if h.onRepair != nil {
		h.onRepair(stage, kill)
	}
}

// options are Options resolved against the run configuration.
type options struct {
	maxBatch    int64
	retained    int
	fullEvery   int
	prefetch    int64
	readRows    int
	trigger     time.Duration
	parallelism int
	idleBatches bool
	maxBatches  int
	lineage     bool // lost pieces are rebuilt by lineage
	hooks       testHooks
}

func (o Options) resolve(cfg run.Config) (*options, error) {
	flags, _ := cfg.Options.(Options)
	r := &options{
		maxBatch: o.MaxBatchRecords, retained: o.RetainedBatches, fullEvery: o.FullSnapshotEvery,
		prefetch: o.PrefetchRecords, readRows: o.ReadBatchRows, trigger: o.Trigger,
		parallelism: cfg.Parallelism, idleBatches: o.IdleBatches, maxBatches: o.MaxBatches, hooks: o.hooks,
	}
	// Options set in code win; otherwise the CLI's flags (cfg.Options),
	// then the package defaults.
	if r.maxBatch == 0 {
		r.maxBatch = flags.MaxBatchRecords
	}
	if r.maxBatch == 0 {
		r.maxBatch = DefaultMaxBatchRecords
	}
	if r.retained == 0 {
		r.retained = flags.RetainedBatches
	}
	if r.retained == 0 {
		r.retained = DefaultRetainedBatches
	}
	if r.fullEvery == 0 {
		r.fullEvery = DefaultFullSnapshotEvery
	}
	if r.prefetch == 0 {
		r.prefetch = DefaultPrefetchRecords
	}
	if r.readRows == 0 {
		r.readRows = DefaultReadBatchRows
	}
	if r.trigger <= 0 {
		r.trigger = flags.Trigger
	}
	var err error
	if r.lineage, err = resolveRecovery(o.LostPieceRecovery, flags.LostPieceRecovery, cfg.Workers == run.WorkersProcess); err != nil {
		return nil, err
	}
	switch {
	case r.maxBatch < 0:
		return nil, fmt.Errorf("max batch records must not be negative, got %d", r.maxBatch)
	case r.retained < 1:
		return nil, fmt.Errorf("retained batches must be at least 1, got %d", r.retained)
	case r.fullEvery < 1:
		return nil, fmt.Errorf("full snapshot interval must be at least 1, got %d", r.fullEvery)
	case r.prefetch < 1 || r.readRows < 1:
		return nil, fmt.Errorf("prefetch records and read batch rows must be positive")
	case r.trigger < 0:
		return nil, fmt.Errorf("trigger must not be negative, got %s", r.trigger)
	case r.parallelism < 1:
		return nil, fmt.Errorf("parallelism must be at least 1, got %d", r.parallelism)
	}
	return r, nil
}

// Executor is the microbatch executor. The zero value uses the defaults.
type Executor struct {
	Options
}

// Name implements run.Executor.
func (Executor) Name() string { return "microbatch" }

// Traits implements run.Executor. No first durable point: the executor
// reads ahead of its batches, so under load the whole input can be read
// before batch 0 commits, and a crash that waited for the commit would
// never fire; a crash before the first commit still restores from the
// offsets logged before the batch ran.
func (Executor) Traits() run.Traits {
	return run.Traits{Flags: []string{"trigger", "max-batch-records", "retained-batches", "lost-piece-recovery",
		"detect-delay", "acquire-delay"},
		OwnPositions: true, MidWorkPoint: PointMidRun, NoOptions: Options{}, Mistakes: mistakes, ProcessWorkers: true, ProcessTrace: true}
}

// Variant implements run.Options: microbatch runs one way.
func (Options) Variant() string { return "" }

// WithVariant implements run.Options.
func (o Options) WithVariant(string) run.Options { return o }

// Cadence implements run.Options: the trigger interval.
func (o Options) Cadence() time.Duration { return o.Trigger }

// WithCadence implements run.Options: the options triggering a batch every d.
func (o Options) WithCadence(d time.Duration) run.Options {
	o.Trigger = d
	return o
}

// Fixed implements run.Options: a resumed run may change every setting.
func (Options) Fixed(run.Config) map[string]string { return nil }

// FailPoints implements run.Executor.
func (Executor) FailPoints() []string { return append([]string(nil), failPoints...) }

// Workers implements run.Executor.
func (Executor) Workers(cfg run.Config) int { return cfg.Parallelism }

// Run implements run.Executor. It plays the part of the cluster manager:
// it starts a coordinator, and when that coordinator crashes it tears down
// everything the coordinator and its workers held and starts a brand-new
// one, which recovers from durable storage, re-opened sources and the
// sink's own recovery alone.
func (e Executor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	if env.Store == nil {
		return nil, errors.New("microbatch: no durable storage (--storage)")
	}
	opts, err := e.Options.resolve(env.Config)
	var refused run.RefusedError
	if errors.As(err, &refused) {
		return nil, refused
	}
	if err != nil {
		return nil, fmt.Errorf("microbatch: %w", err)
	}
	runID := cmp.Or(e.RunID, env.Config.RunID, run.NewRunID())
	env.Config.RunID = runID // what run.Execute reports as run_id
	if !validStageID(runID) {
		return nil, fmt.Errorf("microbatch: run id %q: use letters, digits, _ and - only", runID)
	}
	if err := env.AttachDestination(ctx, runPrefix(env.Job.Name, runID)); err != nil {
		return nil, fmt.Errorf("microbatch: %w", err)
	}
	if opts.lineage {
		topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
		if err != nil {
			return nil, fmt.Errorf("microbatch: %w", err)
		}
		if err := checkLineage(topo); err != nil {
			return nil, fmt.Errorf("microbatch: %w", err)
		}
	}
	pieceRecovery := RecoveryRerunBatch
	if opts.lineage {
		pieceRecovery = RecoveryLineage
	}
	met := newMetrics(env.Config.Progress, pieceRecovery, env.Begin())
	met.series = env.Series
	if env.Config.Resumed {
		met.processDied()
	}
	var procs *procRun
	if env.Config.Workers == run.WorkersProcess {
		if procs, err = startProcRun(ctx, env, opts, runID); err != nil {
			if errors.As(err, &refused) {
				return nil, refused
			}
			return nil, fmt.Errorf("microbatch: %w", err)
		}
		defer procs.close()
		if h := opts.hooks.onProcs; h != nil {
			h(procs)
		}
	}
	summary := func() *report.Summary {
		if procs != nil {
			procs.close()
			met.note(fmt.Sprintf("workers ran as processes of this binary (--workers process): %d incarnations, replacements included; a worker's detect and acquire are measured; %d rows of the hash exchanges went straight from one worker to another (their own links, with the run's token), and the coordinator received %d rows for the sink",
				procs.fleet.Started(), procs.exchanged.Load(), procs.sunk.Load()))
		}
		s := met.summary()
		if procs != nil {
			s.Workers = &report.WorkerProcesses{Started: procs.fleet.Started(), LinkRows: procs.exchanged.Load()}
		}
		return s
	}
	var crashed *recovery
	var reprocessed int64
	for incarnation := 0; ; incarnation++ {
		c, err := newCoordinator(env, opts, runID, incarnation, met)
		if err != nil {
			return nil, fmt.Errorf("microbatch: %w", err)
		}
		c.proc = procs
		err = c.run(ctx, crashed, reprocessed)
		cr, isCrash := fault.AsCrash(err)
		if isCrash {
			// Measurement only: what the crash cut short, for the bill.
			hw, inFlight, logged, rp := c.status()
			cause := fmt.Sprintf("coordinator crashed (%s)", cr.Spec)
			crashed = met.crash(cause, time.Now(), hw)
			env.Trace.Record(spacetime.Event{Kind: spacetime.Crash, Worker: -1, Note: fmt.Sprintf("coordinator crashed (%s)", cr.Spec)})
			reprocessed = rp
			if inFlight {
				met.batchLost(c.cur.Batch, logged, "cut short: "+cause)
				traceBatchLost(env.Trace, c.cur.Batch, logged, "cut short: "+cause)
			}
		}
		c.close(isCrash)
		switch {
		case isCrash && opts.hooks.noRestart:
			return nil, err
		case isCrash:
			if env.Log != nil {
				env.Log.Info("microbatch: coordinator crashed, restarting", "crash", cr.Spec.String(), "incarnation", incarnation+1)
			}
			continue
		case err != nil && ctx.Err() != nil:
			// Stopped from outside: the log is consistent wherever it stopped.
			return summary(), nil
		case err != nil:
			return nil, fmt.Errorf("microbatch: %w", err)
		}
		return summary(), nil
	}
}
