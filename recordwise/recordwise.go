package recordwise

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Defaults of the settings the CLI does not expose. They are variables so
// tests and embedding programs can change them.
var (
	// DefaultBufferRows is the capacity of a network buffer in rows: a
	// buffer is flushed into its channel when full or after
	// --buffer-timeout.
	DefaultBufferRows = 1024
	// DefaultChannelBuffers is how many buffers one channel holds before
	// its producer is backpressured.
	DefaultChannelBuffers = 4
	// DefaultReadRows is the row limit of one source read: unpaced, four
	// network buffers' worth per hand-off from the reader; a paced read
	// returns what is due, so it adds no latency.
	DefaultReadRows = 4096
)

// Options are the recordwise settings. The CLI's flags (the first group)
// arrive as run.Config.Options; an Executor's own Options win over them
// field by field. The zero value uses the defaults above.
type Options struct {
	// Barriers is aligned (the default) or unaligned (--barriers), and
	// AlignmentTimeout switches an aligning checkpoint to unaligned after
	// this long (0 = never).
	Barriers         string
	AlignmentTimeout time.Duration
	// CheckpointInterval is the time between recovery points; it must be
	// positive unless NoPeriodicCheckpoints.
	CheckpointInterval time.Duration
	// BufferTimeout flushes a network buffer this long after its first
	// row even if it is not full.
	BufferTimeout time.Duration
	// CheckpointTimeout aborts a recovery point not complete after this
	// long; RetainedCheckpoints complete ones are kept.
	CheckpointTimeout   time.Duration
	RetainedCheckpoints int

	// RunID names the run's namespace in durable storage; an earlier run's
	// id resumes it. Empty: run.Config.RunID, else a new id per Run.
	RunID string
	// BufferRows, ChannelBuffers and ReadRows override the defaults.
	BufferRows     int
	ChannelBuffers int
	ReadRows       int
	// NoPeriodicCheckpoints turns the checkpoint ticker off: only the
	// final checkpoint of a bounded run is taken (benchmarks compare it
	// with checkpointing on).
	NoPeriodicCheckpoints bool
	// SinkTaskRate, when positive, throttles every task that writes to the
	// sink to this many input rows per second, modelling a slow
	// destination: it backpressures the whole job.
	SinkTaskRate float64

	hooks testHooks
}

// testHooks are knobs only this package's tests set.
type testHooks struct {
	// fleet sees the run's worker processes once they are closed
	// (--workers process), for the tests' orphan checks; fleetStarted
	// once they are ready.
	fleet, fleetStarted func(*run.Fleet)
	// channelDelay delays every item of the channel from (chain, subtask)
	// to (chain, subtask) by the returned duration: a slow link.
	channelDelay func(fromChain string, fromSub int, toChain string, toSub int) time.Duration
	// triggerAfter, when set, replaces the periodic checkpoints: one is
	// triggered as the sources' reads (over every incarnation) reach each
	// of these record counts, so a golden test's story has a fixed number
	// of them.
	triggerAfter []int64
	// onRestore sees what storage held and what was chosen at every start,
	// before anything is read.
	onRestore func(storage.Store, string, checkpoint.Listing, checkpoint.RestorePlan)
	// flushDelay lengthens every asynchronous sink flush: a slow
	// destination, seen by the sink task only as a flush in flight.
	flushDelay time.Duration
}

type options struct {
	settings       Options // the CLI's group of Options, merged
	bufferRows     int
	channelBuffers int
	readRows       int
	noPeriodic     bool
	sinkTaskRate   float64
	hooks          testHooks
}

func (o Options) resolve(cfg run.Config) (*options, error) {
	r := &options{settings: o.merged(cfg), bufferRows: o.BufferRows, channelBuffers: o.ChannelBuffers, readRows: o.ReadRows,
		noPeriodic: o.NoPeriodicCheckpoints, sinkTaskRate: o.SinkTaskRate, hooks: o.hooks}
	if r.bufferRows == 0 {
		r.bufferRows = DefaultBufferRows
	}
	if r.channelBuffers == 0 {
		r.channelBuffers = DefaultChannelBuffers
	}
	if r.readRows == 0 {
		r.readRows = DefaultReadRows
	}
	if r.bufferRows < 1 || r.channelBuffers < 1 || r.readRows < 1 || r.sinkTaskRate < 0 {
		return nil, fmt.Errorf("buffer rows, channel buffers and read rows must be positive, the sink rate not negative")
	}
	return r, nil
}

// Executor is the recordwise executor. The zero value uses the defaults.
type Executor struct {
	Options
}

// Name implements run.Executor.
func (Executor) Name() string { return "recordwise" }

// Traits implements run.Executor: the barrier modes are its variants, and
// the first recovery point is durable once its metadata is written.
func (Executor) Traits() run.Traits {
	return run.Traits{Flags: []string{"barriers", "alignment-timeout", "checkpoint-interval", "buffer-timeout",
		"checkpoint-timeout", "retained-checkpoints", "detect-delay", "acquire-delay"},
		Variants:          run.Variants{Flag: "barriers", Kind: "barrier mode", Values: []string{barrierAligned, barrierUnaligned}},
		FirstDurablePoint: PointAfterMetadata, CommitPoint: PointSinkAfterCommit, NoOptions: Options{}, Mistakes: slices.Concat(cutMistakes, worldMistakes),
		ProcessWorkers: true, ProcessTrace: true}
}

// FailPoints implements run.Executor.
func (Executor) FailPoints() []string { return append([]string(nil), failPoints...) }

// Workers implements run.Executor: worker w runs subtask w of every stage.
func (Executor) Workers(cfg run.Config) int { return cfg.Parallelism }

// Run implements run.Executor.
func (e Executor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	s, _, err := e.RunReport(ctx, env)
	return s, err
}

// maxRestarts bounds restarts: every injected fault fires once, so only a
// bug could need more.
const maxRestarts = 1000

// RunReport is Run that also returns the checkpoint history and the
// restarts. It plays the part of the cluster manager: it starts an
// incarnation of the job, and when a worker or the coordinator of that
// incarnation dies it waits --detect-delay (the modelled heartbeat timeout),
// tears every task down, waits --acquire-delay (a replacement worker) and
// starts a brand-new incarnation from durable storage, re-opened sources
// and the sink's own recovery alone.
func (e Executor) RunReport(ctx context.Context, env *run.Env) (*report.Summary, *Report, error) {
	if env.Store == nil {
		return nil, nil, errNoStore
	}
	cfg := env.Config
	opts, err := e.Options.resolve(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("recordwise: %w", err)
	}
	mode, err := barrier.ParseMode(opts.settings.Variant(), opts.settings.AlignmentTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("recordwise: %w", err)
	}
	if opts.settings.CheckpointInterval <= 0 && !opts.noPeriodic {
		return nil, nil, fmt.Errorf("recordwise: checkpoint interval must be positive, got %s", opts.settings.CheckpointInterval)
	}
	pl, err := buildPlan(env.Job, cfg.Parallelism)
	if err != nil {
		return nil, nil, fmt.Errorf("recordwise: %w", err)
	}
	runID := cmp.Or(e.RunID, env.Config.RunID, run.NewRunID())
	env.Config.RunID = runID // what run.Execute reports as run_id
	if !validName(runID) {
		return nil, nil, fmt.Errorf("recordwise: run id %q: use letters, digits, '.', '_' and '-' only", runID)
	}
	if err := env.AttachDestination(ctx, runPrefix(env.Job.Name, runID)); err != nil {
		return nil, nil, fmt.Errorf("recordwise: %w", err)
	}
	sh := &shared{env: env, opts: opts, plan: pl, mode: mode, runID: runID,
		prefix: runPrefix(env.Job.Name, runID), obs: newObserver(cfg.Progress), patient: env.PatientStore()}
	sh.storeOnce = sh.patient.Once()
	declareLanes(env.Trace, pl)
	start := env.Begin()
	sh.obs.begin(start)
	sh.obs.series = env.Series
	if cfg.Resumed {
		sh.obs.processDied()
	}
	finish := func() (*report.Summary, *Report) {
		s, rep := sh.obs.summary(time.Since(start))
		if sh.proc != nil {
			s.Notes = append(s.Notes, sh.proc.note())
			s.Workers = &report.WorkerProcesses{Started: sh.proc.fleet.Started(), LinkRows: sh.proc.linked.Load()}
		}
		return s, &rep
	}
	if cfg.Workers == run.WorkersProcess {
		if sh.proc, err = startProcCoord(ctx, sh); err != nil {
			return nil, nil, fmt.Errorf("recordwise: %w", err)
		}
		defer sh.proc.close()
	}
	var pending *recovery
	for attempt := 0; ; attempt++ {
		if attempt > maxRestarts {
			return nil, nil, fmt.Errorf("recordwise: gave up after %d restarts", maxRestarts)
		}
		if ctx.Err() != nil {
			s, rep := finish()
			s.Notes = append(s.Notes, "stopped before the end of the input")
			return s, rep, nil
		}
		inc, err := newIncarnation(ctx, sh, attempt)
		if err != nil {
			if cr, ok := fault.AsCrash(err); ok {
				at := time.Now()
				bill := &report.Crash{At: at}
				var ready time.Time
				if sh.proc != nil && cr.Worker >= 0 {
					// A worker process killed while the coordinator
					// restores: no attempt runs, so it is replaced here.
					if _, _, err := sh.proc.fleet.Kill(cr.Worker); err != nil {
						return nil, nil, fmt.Errorf("recordwise: %w", err)
					}
					if ready, err = sh.proc.replaceDead(ctx, bill); err != nil {
						return nil, nil, fmt.Errorf("recordwise: %w", err)
					}
				} else {
					ready = env.Replacement().Wait(ctx, bill, at)
				}
				who := "coordinator"
				if cr.Worker >= 0 {
					who = fmt.Sprintf("worker %d", cr.Worker) // a worker kill at the point: recovery starts again all the same
				}
				pending = sh.obs.crash(fmt.Sprintf("%s killed during recovery (%s)", who, cr.Spec), bill, ready, 0)
				continue
			}
			if ctx.Err() != nil {
				s, rep := finish()
				s.Notes = append(s.Notes, "stopped before the end of the input")
				return s, rep, nil
			}
			return nil, nil, fmt.Errorf("recordwise: %w", err)
		}
		// The catch-up target is set before any task reads.
		sh.obs.restarted(pending, inc.restoreInfo(), inc.restoredOffsets(), time.Now())
		pending = nil
		inc.start()
		var oc outcome
		select {
		case <-inc.done:
			oc = *inc.outcome
		case <-ctx.Done():
		}
		switch {
		case oc.kind == outCrash:
			// The survivors run on until the crash is detected; the
			// replacement is acquired once the job is torn down.
			bill := &report.Crash{At: oc.at}
			var ready time.Time
			var inProgress []checkpoint.ID
			if sh.proc != nil {
				// Every task stops, on every process; then the dead
				// processes are replaced, measured.
				inc.stop()
				inProgress = inc.coord.pending()
				inc.teardown()
				if ready, err = sh.proc.replaceDead(ctx, bill); err != nil {
					return nil, nil, fmt.Errorf("recordwise: %w", err)
				}
			} else {
				detected := env.Replacement().Detected(ctx, bill, time.Now())
				inc.stop()
				inProgress = inc.coord.pending()
				inc.teardown()
				ready = env.Replacement().Acquired(ctx, bill, detected)
			}
			sh.obs.cutShort(attempt, inProgress, oc.cause)
			traceCutShort(env.Trace, inProgress, oc.cause)
			pending = sh.obs.crash(oc.cause, bill, ready, len(inProgress))
			if env.Log != nil {
				env.Log.Info("recordwise: restarting after a crash", "cause", oc.cause, "attempt", attempt+1)
			}
		case oc.kind == outError:
			inc.stop()
			inc.teardown()
			return nil, nil, fmt.Errorf("recordwise: %w", oc.err)
		case oc.kind == outDone:
			inc.stop()
			inc.teardown()
			s, rep := finish()
			return s, rep, nil
		default: // stopped from outside
			inc.stop()
			inc.teardown()
			s, rep := finish()
			s.Notes = append(s.Notes, "stopped before the end of the input")
			return s, rep, nil
		}
	}
}
