package run

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// DefaultInputs are the embedded inputs used when --input is not given:
// generated, so a fresh machine needs nothing else. The join's inputs are
// smaller and have more keys so the output stays proportionate.
func DefaultInputs(jobName string, seed int64) map[string]string {
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=100000,keys=100000,seed=%d", seed),
			job.InputPayments: fmt.Sprintf("gen:records=100000,keys=100000,seed=%d", seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=1000000,keys=1000,seed=%d", seed)}
}

// ParseInputs turns repeated --input values into a map from input name to
// spec. A value is NAME=SPEC when the text before the first ':' holds a '=';
// otherwise it is the spec of the job's single input.
func ParseInputs(j *job.Job, values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		name, spec := "", v
		head, _, _ := strings.Cut(v, ":")
		if n, _, ok := strings.Cut(head, "="); ok {
			name, spec = n, v[len(n)+1:]
		} else if len(j.Inputs) == 1 {
			name = j.Inputs[0]
		} else {
			return nil, fmt.Errorf("invalid --input %q: job %s has inputs %s, so write NAME=SPEC", v, j.Name, strings.Join(j.Inputs, " and "))
		}
		known := false
		for _, in := range j.Inputs {
			known = known || in == name
		}
		if !known {
			return nil, fmt.Errorf("invalid --input %q: job %s has no input %q (inputs: %s)", v, j.Name, name, strings.Join(j.Inputs, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("invalid --input: input %q given twice", name)
		}
		out[name] = spec
	}
	if len(out) > 0 && len(out) != len(j.Inputs) {
		var missing []string
		for _, in := range j.Inputs {
			if _, ok := out[in]; !ok {
				missing = append(missing, in)
			}
		}
		return nil, fmt.Errorf("invalid --input: job %s also needs %s", j.Name, strings.Join(missing, ", "))
	}
	return out, nil
}

// InputError is a --input value that could not be opened: a malformed
// spec, a missing file, a file with the wrong columns. The CLI treats it as
// an invalid flag value.
type InputError struct {
	Input string
	Spec  string // as given; may be empty
	Err   error
}

// Error is one line: the input as NAME=SPEC, then what is wrong, without
// the source's own "kind:" or "source SPEC:" prefix, which would repeat it.
func (e InputError) Error() string {
	what, msg := e.Input, e.Err.Error()
	if e.Spec != "" {
		what += "=" + e.Spec
		kind, _, _ := strings.Cut(e.Spec, ":")
		msg = strings.TrimPrefix(msg, fmt.Sprintf("source %q: ", e.Spec))
		msg = strings.TrimPrefix(msg, kind+": ")
	}
	return fmt.Sprintf("invalid --input %s: %s", what, msg)
}
func (e InputError) Unwrap() error { return e.Err }

// RefusedError is an executor's refusal of what its flags ask, found only
// once it reads its recovery point (a parallelism the point cannot be
// re-split to): like a bad flag, it is the user's to change, and the CLI
// exits 2 for it.
type RefusedError struct{ Err error }

func (e RefusedError) Error() string { return e.Err.Error() }
func (e RefusedError) Unwrap() error { return e.Err }

// OutputPolicy says what Prepare does with an output directory that already
// holds files.
type OutputPolicy int

const (
	// OutputRequireEmpty refuses a non-empty directory (the CLI's default).
	OutputRequireEmpty OutputPolicy = iota
	// OutputOverwrite clears it first (--overwrite).
	OutputOverwrite
	// OutputResume keeps it: the run continues one whose output is there
	// (a restarted process, or a test resuming from durable storage).
	OutputResume
)

// Prepare builds the job, opens its sources, applies the output policy,
// opens the sink and (when withStore) the durable storage. Inputs are opened
// first so a bad --input is reported before anything is written. On error
// everything opened so far is closed.
func Prepare(ctx context.Context, cfg Config, alloc memory.Allocator, log *slog.Logger, withStore bool, output OutputPolicy) (*Env, error) {
	j, err := job.Build(cfg.Job, cfg.Params)
	if err != nil {
		return nil, err
	}
	env := &Env{Config: cfg, Job: j, Sources: map[string]source.Source{}, Alloc: alloc, Log: log,
		Faults: fault.NewInjector(cfg.Fails)}
	ok := false
	defer func() {
		if !ok {
			_ = env.Close()
		}
	}()
	names := make([]string, 0, len(cfg.Inputs))
	for n := range cfg.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		src, err := source.Open(cfg.Inputs[n], source.Options{DefaultSeed: cfg.Seed})
		if err != nil {
			return nil, InputError{Input: n, Spec: cfg.Inputs[n], Err: err}
		}
		env.Sources[n] = src
		if ps, ok := src.(*source.PushSource); ok && log != nil {
			// A pusher needs the address, and port 0 picks one at random.
			log.Warn("push source waiting for records", "input", n, "address", ps.Addr())
		}
	}
	inUse, err := outdir.InUse(cfg.Output)
	if err != nil {
		return nil, err
	}
	switch {
	case inUse && output == OutputRequireEmpty:
		return nil, outdir.BusyError{Dir: cfg.Output}
	case inUse && output == OutputOverwrite:
		if err := outdir.Clear(cfg.Output); err != nil {
			return nil, fmt.Errorf("clearing output directory %s: %w", cfg.Output, err)
		}
	}
	if env.Sink, err = sink.Open(cfg.Output, cfg.SinkMode, cfg.OutputFormat, j.Output, alloc); err != nil {
		return nil, fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	if err := sink.Throttle(env.Sink, cfg.SinkRowsPerSecond); err != nil {
		return nil, fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	if err := sink.Roll(env.Sink, cfg.SinkRoll); err != nil {
		return nil, fmt.Errorf("output %s: %w", cfg.Output, err)
	}
	if withStore {
		if env.Store, err = storage.Open(ctx, cfg.Storage, storage.Options{Endpoint: cfg.S3Endpoint, CallTimeout: cfg.StorageTimeout}); err != nil {
			// storage.Open's errors name the location already.
			return nil, err
		}
	}
	ok = true
	return env, nil
}

// Execute runs exec on env, fills in the summary's description of the run
// (job, executor, barriers, sink, inputs, output), folds its progress
// events into the summary's history and measures the output with Finish,
// reaching the run driver's fault points (fault.RunPoints) before, in and
// after it. The CLI and the benchmark harness both run jobs through it.
func Execute(ctx context.Context, exec Executor, env *Env) (*report.Summary, error) {
	cfg := env.Config
	// Every run keeps its progress history for the summary; the events
	// still reach the --progress destination, if there is one.
	hist := report.NewHistory(env.Config.Progress)
	// The series counts from the run's start, the moment timed kills and
	// the bill's at_ms count from, so its buckets and the fault agree.
	env.Series = report.NewSeriesRecorder(env.Begin(), cfg.Series)
	env.Config.Progress = hist
	undo := recordSources(env, env.Series, exec.Traits().OwnPositions)
	s, err := exec.Run(ctx, env)
	undo()
	ranUntil := time.Now()
	// Decided here, not after Finish: a signal while the output is
	// exported does not make a complete run an interrupted one.
	interrupted := ctx.Err() != nil
	env.Config.Progress = cfg.Progress
	// The executor wrote the run id it used into env.Config (its own
	// option, the configured one, or a new one).
	cfg.RunID = env.Config.RunID
	if err != nil {
		return nil, fmt.Errorf("%s run of %s failed: %w", exec.Name(), cfg.Job, err)
	}
	// The end of the run is a protocol of its own (finish the sink, then
	// the caller marks the run finished), and a process that dies inside it
	// must resume like one that died earlier: its points take a process
	// kill only (fault.RunPoints).
	if err := env.Faults.Point(fault.PointBeforeFinish, fault.Coordinator); err != nil {
		return nil, err
	}
	s.Interrupted = interrupted
	s.Job, s.Executor, s.SinkMode, s.OutputFormat = cfg.Job, exec.Name(), string(cfg.SinkMode), string(cfg.OutputFormat)
	s.Inputs, s.Output, s.Parallelism = cfg.Inputs, cfg.Output, cfg.Parallelism
	tr := exec.Traits()
	if len(tr.Variants.Values) > 0 {
		v := tr.Variants.Values[0]
		if cfg.Options != nil && cfg.Options.Variant() != "" {
			v = cfg.Options.Variant()
		}
		s.Barriers = &v
	}
	if tr.Reference {
		s.Parallelism = 1
	} else if cfg.RunID != "" {
		id := cfg.RunID
		s.RunID = &id
	}
	if cfg.Resumed {
		s.Resumed = true
		s.Notes = append(s.Notes, fmt.Sprintf("resumed run %s: the counts are this process's; records the earlier process read after its newest recovery point were read again", cfg.RunID))
	}
	hist.Fold(s)
	billSeries(cfg, env.Series, s, ranUntil)
	if err := Finish(env, s); err != nil {
		return nil, err
	}
	if err := env.Faults.Point(fault.PointAfterFinish, fault.Coordinator); err != nil {
		return nil, err
	}
	for _, f := range env.Faults.Pending() {
		s.UnfiredFaults = append(s.UnfiredFaults, f.String())
		s.Notes = append(s.Notes, fmt.Sprintf("--fail %s did not fire: the run ended before reaching it", f))
	}
	return s, nil
}

// Finish completes the sink, reaching fault.PointMidFinish in its middle,
// and measures the output directory into s: visible rows, resolved rows and
// duplicates.
func Finish(env *Env, s *report.Summary) error {
	mid := func() error { return env.Faults.Point(fault.PointMidFinish, fault.Coordinator) }
	var err error
	if mf, ok := env.Sink.(sink.MidFinisher); ok {
		err = mf.FinishWith(mid)
	} else if err = mid(); err == nil {
		err = env.Sink.Finish()
	}
	if err != nil {
		return fmt.Errorf("finishing output: %w", err)
	}
	// Counted without holding the output: the summary of an hour-long run
	// must not need memory for every row it wrote.
	st, err := sink.ResolveEach(env.Config.Output, env.Job.Output, sink.ResolveOptions{MemoryBudget: env.Config.ResolveMemory}, nil)
	if err != nil {
		return fmt.Errorf("reading back output: %w", err)
	}
	s.VisibleRows, s.ResolvedRows, s.SinkDuplicateRows = st.VisibleRows, st.ResolvedRows, st.DuplicateRows
	s.SinkConflictingRows = st.ConflictingRows
	if st.ConflictingRows > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d visible rows share write key and _version with a different row: a replay merged its inputs in another order (expected for append after a crash; resolution keeps the greatest row)", st.ConflictingRows))
	}
	if s.LostRecords > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("a forgetful source lost %d records in crashes: the result is incomplete, not exactly-once", s.LostRecords))
	}
	if s.SinkDuplicateRows > 0 {
		if env.Config.SinkMode == sink.Append {
			s.Notes = append(s.Notes, fmt.Sprintf("append sink: %d duplicate rows from replay are visible (resolving by write key removes them)", s.SinkDuplicateRows))
		} else {
			// The idempotent and transactional contracts promise none: say
			// so rather than excuse them as replay.
			s.Notes = append(s.Notes, fmt.Sprintf("%s sink: %d duplicate rows are visible, which its contract does not allow (resolving by write key removes them)", env.Config.SinkMode, s.SinkDuplicateRows))
		}
	}
	if s.LateRows > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d late rows were dropped: the input's disorder exceeds --max-disorder", s.LateRows))
	}
	return nil
}
