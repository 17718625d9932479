package run

import (
	"context"
	"time"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/report"
)

// Executor runs a job under one recovery model.
//
// Code shared by every executor (this package, bench, the CLI's commands)
// never asks an executor's name what it can do: it asks Traits, a small
// descriptor, and the executor's Options. Only the CLI's registry lists
// the executors by name.
type Executor interface {
	// Name is the value of --executor.
	Name() string
	// Traits says how the executor differs from the others.
	Traits() Traits
	// FailPoints lists the named crash points this executor has.
	FailPoints() []string
	// Workers is the number of workers the executor will run for cfg, so
	// worker kills can be validated before the run.
	Workers(cfg Config) int
	// Run runs the job to the end of a bounded input (or until ctx is
	// cancelled for an endless one), surviving the injected crashes, and
	// returns its summary. Run does not call Sink.Finish; the caller does.
	// An executor that keeps durable state sets env.Config.RunID to the
	// run id it used.
	Run(ctx context.Context, env *Env) (*report.Summary, error)
}

// Traits is what an executor is, beyond running a job.
type Traits struct {
	// Reference marks the failure-free oracle every other executor's
	// result is checked against: it keeps no durable storage (so no run
	// id, no run record, no --resume), takes no --fail, runs on one worker
	// (its summary says parallelism 1), reports no progress, and is no
	// bench contestant.
	Reference bool
	// Flags names the command-line flags (without "--") that set the
	// executor's Options; a flag of another executor is refused.
	Flags []string
	// Variants are the ways the executor runs that bench compares as
	// separate contestants (recordwise's barrier modes); none when
	// Variants.Values is empty.
	Variants Variants
	// FirstDurablePoint is the fail point reached once the first recovery
	// point is durable; `rewind trace` holds its default crash back until
	// then, so the story shows a restore from a recovery point. Empty when
	// no point can be waited for.
	FirstDurablePoint string
	// CommitPoint is the fail point the coordinator passes each time a
	// recovery point has completed and its output is committed. A crash
	// there (occurrence 1) is certain to restore the first complete point,
	// however late the machine's load makes it; a record-count kill is not
	// (it lands at a read, and on a busy machine the input can end before
	// the first point completes). Empty when the executor has none.
	CommitPoint string
	// MidWorkPoint is a fail point every worker passes inside each unit
	// of work (a micro-batch) once per attempt; `rewind trace` then kills
	// worker 1 there half-way through the run instead of after a record
	// count, so the crash lands inside a batch and a lost-piece recovery
	// has something to repair. Empty: the record-count crash.
	MidWorkPoint string
	// OwnPositions marks an executor that reads its input ahead of what
	// it processes (microbatch's prefetch): how far its readers got says
	// little about its progress, so the run over time takes what was
	// processed, re-read and how far behind it is from what the executor
	// reports through Env.SeriesInput instead.
	OwnPositions bool
	// Mistakes are the wrong variants (package mistake) the executor can
	// run for `rewind trace --teach`, which runs each on the first
	// executor listing it. Mistakes made outside the executor (the sink
	// mode, a forgetful input) need no listing.
	Mistakes []mistake.Name
	// ProcessWorkers marks an executor that runs its workers as processes
	// of this binary with --workers process (it implements ProcessWorker);
	// the others refuse that mode.
	ProcessWorkers bool
	// ProcessTrace marks a ProcessWorkers executor whose trace diagram
	// stays true with --workers process: every event it draws is stamped
	// at the moment it happened (a kill at the kill, not once the
	// replacement has joined), by its coordinator or by a worker process
	// on the coordinator's clock and sent to it (spacetime.Forwarded), so
	// `rewind trace --workers process` runs it. Without it, what runs inside a worker process would
	// be missing from the picture, and trace refuses the mode.
	ProcessTrace bool
	// NoOptions is the executor's Options with nothing set (its zero
	// value), for code that holds only the executor (bench picks a variant
	// on it).
	NoOptions Options
}

// Variants are an executor's ways of running (Traits.Variants).
type Variants struct {
	// Flag picks one ("barriers"); the summary names the choice after it.
	Flag string
	// Kind is what one is called in messages ("barrier mode").
	Kind string
	// Values are the variants, the default first.
	Values []string
}

// Options are the settings one executor owns, its own package's Options
// type; Config carries them without knowing their fields, and the
// executor reads its own back with a type assertion.
type Options interface {
	// Variant is the variant (Traits.Variants.Values) the options select; empty
	// when the executor has none.
	Variant() string
	// WithVariant is the options with variant v selected.
	WithVariant(v string) Options
	// Cadence is the time between recovery points the options ask for
	// (recordwise: checkpoint interval; microbatch: trigger; diskphase:
	// finite-job interval); 0 when they set none. WithCadence is the
	// options with it set to d: bench gives every contestant the same one.
	Cadence() time.Duration
	WithCadence(d time.Duration) Options
	// Fixed are the settings a resumed run of cfg must keep, as flag
	// (with "--") and value: what the run's recovery points were cut
	// from. The run record keeps them (runrecord.Record.Fixed).
	Fixed(cfg Config) map[string]string
}
