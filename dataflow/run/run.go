// Package run configures and executes a run: the validated configuration
// the CLI hands an executor, the opened job environment, the Executor
// interface, and Prepare, Execute and Finish. What a run reports is in
// dataflow/report; the run record, the output directory's bookkeeping and
// the recovery-point listing are in runrecord, outdir and inspect.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Config is everything `rewind run` was asked to do, already validated.
type Config struct {
	Job      string
	Params   job.Params
	Executor string
	// Options are the executor's own settings, its package's Options type
	// (see Options); nil leaves them all unset.
	Options Options
	// Inputs maps job input names to source specs.
	Inputs       map[string]string
	Output       string
	OutputFormat sink.Format
	SinkMode     sink.Mode
	// SinkRowsPerSecond throttles the sink (sink.Throttle): every
	// executor's writers together take at most this many rows a second,
	// a destination slower than the engine; 0 = unthrottled.
	SinkRowsPerSecond float64
	// SinkRoll is when an append sink's in-progress files become visible
	// (sink.Roll); the zero value publishes every flush at once.
	SinkRoll sink.RollPolicy
	// ResolveMemory bounds the rows Finish holds in memory while it
	// counts the output (sink.ResolveOptions.MemoryBudget; 0 = the
	// default); beyond it sorted runs spill to the temporary directory.
	ResolveMemory int64
	Storage       string
	S3Endpoint    string
	// StorageTimeout is how long one storage call may make no progress
	// before it fails as unreachable (0 = storage.DefaultCallTimeout), and
	// StorageOutageLimit how long a run waits for storage that stopped
	// answering before it fails (0 = storage.OutageLimit(StorageTimeout)).
	StorageTimeout     time.Duration
	StorageOutageLimit time.Duration
	Parallelism        int
	Fails              []fault.Spec
	// DetectDelay is the modelled heartbeat timeout: how long after a
	// worker dies it is declared dead. AcquireDelay is the modelled time
	// to obtain a replacement worker after that. Every executor waits them
	// out identically before it restores; the bill marks them modelled.
	DetectDelay  time.Duration
	AcquireDelay time.Duration
	// Series asks for the run over time (Summary.Series) with per-bucket
	// latency; rewind bench sets it. Without it only what billing
	// catch-up needs is kept.
	Series bool
	Seed   int64
	// RunID names the run's namespace in durable storage. The CLI sets it
	// (a new id, or the one --resume continues); empty means the executor
	// picks a new one. An executor resumes from whatever its storage holds
	// under that id, and writes the id it used back here.
	RunID string
	// Resumed says RunID names a run whose earlier process died, and this
	// process continues it (--resume).
	Resumed bool
	// Progress receives one JSON line per progress event when non-nil.
	Progress io.Writer
	// Workers is where the workers run (--workers); "" is inproc. Only
	// an executor with Traits.ProcessWorkers takes process.
	Workers WorkerMode
	// HeartbeatInterval is how often a worker process beats, and
	// HeartbeatTimeout how long the coordinator hears nothing from one
	// before declaring it dead (--workers process only; 0 =
	// DefaultHeartbeatInterval, DefaultHeartbeatTimeout).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
}

// Env is a job ready to run: the built job, its opened sources, sink and
// durable storage.
type Env struct {
	Config  Config
	Job     *job.Job
	Sources map[string]source.Source
	Sink    sink.Sink
	Store   storage.Store
	Alloc   memory.Allocator
	Faults  *fault.Injector
	Log     *slog.Logger
	// Trace, when set (rewind trace), records the steps a time-space
	// diagram draws; nil in ordinary runs.
	Trace *spacetime.Recorder
	// Mistake, when set, is the deliberately wrong variant the executor
	// runs (see package mistake). Only `rewind trace --teach` sets it,
	// after Prepare; nothing in Config can, so run and bench never do.
	Mistake *mistake.Plan
	// Series records the run over time: run.Execute sets it and wraps the
	// sources to feed it; executors report to it what becomes visible
	// (with its latency) and their recovery points. Nil-safe: nil when
	// an executor runs outside Execute.
	Series *report.SeriesRecorder
	// seriesInputs are Series' inputs by name when the executor reports
	// its own positions (Traits.OwnPositions); see SeriesInput.
	seriesInputs map[string]report.SeriesInput
	// seriesFirst are Series' indexes of each input's partition 0 (see
	// SeriesReader).
	seriesFirst map[string]int
	// WorkerCommand starts a worker process (Config.Workers process);
	// the CLI sets it to `rewind worker`, tests to their own binary.
	WorkerCommand *WorkerCommand

	// patient is PatientStore's one outage clock, made on first use: the
	// executor's calls and the sink's journal wait out the same outage.
	patientOnce sync.Once
	patient     *storage.Patient

	beginOnce sync.Once
	start     time.Time
}

// Begin marks the start of the run, the moment timed worker kills (--fail
// worker=W,at=D) and the bill's at_ms count from, and returns it. The
// executor calls it as it starts; every later call returns the same time.
func (e *Env) Begin() time.Time {
	e.beginOnce.Do(func() {
		e.start = time.Now()
		e.Faults.Start(e.start, nil)
	})
	return e.start
}

// Replacement is the run's modelled detect and acquire (DetectDelay,
// AcquireDelay), which every executor waits out before it restores.
func (e *Env) Replacement() report.Replacement {
	return report.Replacement{Detect: e.Config.DetectDelay, Acquire: e.Config.AcquireDelay}
}

// PatientStore is the run's storage, waiting out an outage up to
// Config.StorageOutageLimit with the waits logged (see storage.Patient).
// Every call returns the same one, so a run has one outage clock.
func (e *Env) PatientStore() *storage.Patient {
	e.patientOnce.Do(func() {
		limit := e.Config.StorageOutageLimit
		if limit <= 0 {
			limit = storage.OutageLimit(e.Config.StorageTimeout)
		}
		e.patient = storage.NewPatient(e.Store, limit, e.Log)
	})
	return e.patient
}

// Close releases the sources, the sink and the store.
func (e *Env) Close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	for _, s := range e.Sources {
		keep(s.Close())
	}
	if e.Sink != nil {
		keep(e.Sink.Close())
	}
	if e.Store != nil {
		keep(e.Store.Close())
	}
	return first
}

// AttachDestination gives the sink, when it keeps state in the output
// directory that a resumed run relies on (sink.Attacher), its journal in
// durable storage under runPrefix, the run's namespace, and has it check
// the directory against what the journal says it holds. Every executor
// with durable storage calls it once it knows its run id, before it uses
// the sink; an error is a damaged destination, named, to stop the run on.
func (e *Env) AttachDestination(ctx context.Context, runPrefix string) error {
	a, ok := e.Sink.(sink.Attacher)
	if !ok || e.Store == nil {
		return nil
	}
	// The journal waits out a storage outage like the executor's own calls
	// do, on the same clock, instead of failing a flush at the first
	// unanswered call.
	return a.Attach(sink.NewJournal(ctx, e.PatientStore().Store(), runPrefix))
}

// NewRunID returns a fresh run id, the namespace of one run in durable
// storage: a UTC timestamp, so listings sort by start, and random hex.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
