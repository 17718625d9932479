package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// Plan is one benchmark: the scenario, who runs it, how often.
type Plan struct {
	// Config is the job every contestant runs (job, params, sink,
	// parallelism, seed, the modelled detect and acquire delays);
	// Executor, Options, Inputs, Output, Storage, Fails and Series are set
	// per run.
	Config run.Config
	// Options are each executor's options (by name) the contestants start
	// from, their variant and cadence set per run; an executor without
	// them starts from its run.Traits.NoOptions.
	Options     map[string]run.Options
	Contestants []Contestant
	// Inputs are the live inputs at rate records/s for a run of
	// parallelism subtasks per stage; nil: GenInputs of the job over
	// Duration.
	Inputs func(rate float64, parallelism int) map[string]string
	// Duration of live input at Rate records/s; Warmup at its start is
	// left out of the figures; Cadence is the time between recovery
	// points every contestant is given (run.Options.WithCadence).
	Duration, Warmup, Cadence time.Duration
	Rate                      float64
	Faults                    Faults
	// Repeat runs every contestant this many times, interleaved; repeat
	// r's timed kills are shifted by a seeded fraction of one cadence
	// (jitter), the same for every contestant.
	Repeat int
	Seed   int64
	// Points are the sweep's points (none: one point of the scenario as
	// it is); Sweep names the swept setting.
	Points []SweepPoint
	Sweep  string
	// Capacity is each contestant's measured unpaced throughput (by
	// name), which a point's Load is a fraction of; Calibration is the
	// same measurement as reported.
	Capacity    map[string]float64
	Calibration []Capacity
	// Command is the command line that replays the benchmark.
	Command string
	// Storage is the base location for durable shared storage; every run
	// gets its own sub-location. Empty means a directory under Scratch.
	Storage string
	// Scratch holds the output directories (and local storage).
	Scratch   string
	Executors map[string]run.Executor
	Alloc     memory.Allocator
	Log       *slog.Logger
	// Progress receives a human line per run.
	Progress io.Writer
	// WorkerCommand starts a worker process for a contestant run with
	// Config.Workers process (run.Env.WorkerCommand).
	WorkerCommand *run.WorkerCommand
}

// Run runs every contestant Repeat times at every point, interleaved
// (A B C D A B C D …), each run compared with the reference's output over
// the same input (the reference runs once per distinct input). A
// contestant's failure is recorded in its RunResult and the benchmark goes
// on; Run returns an error only when the benchmark cannot proceed (bad
// input, a fault some contestant cannot take, the reference failing, ctx
// cancelled).
func Run(ctx context.Context, p Plan) (*Results, error) {
	if _, err := job.Build(p.Config.Job, p.Config.Params); err != nil {
		return nil, err
	}
	p.Repeat = max(p.Repeat, 1)
	if p.Cadence <= 0 || p.Duration <= 0 || p.Warmup < 0 || p.Warmup >= p.Duration {
		return nil, fmt.Errorf("the scenario needs a positive cadence and duration and a warmup shorter than the duration")
	}
	specs := p.Faults.Specs
	byDefault := !p.Faults.None && len(specs) == 0
	if byDefault {
		// Validated at the longest cadence; each point gets its own.
		specs = []fault.Spec{DefaultFault(p.Warmup, p.maxCadence())}
	}
	if p.Faults.None {
		specs = nil
	}
	if err := p.validate(specs); err != nil {
		return nil, err
	}
	points := p.Points
	if len(points) == 0 {
		points = []SweepPoint{{}}
	}
	res := &Results{Version: ResultsVersion, Started: time.Now().UTC(), Command: p.Command,
		Scenario: p.scenario(p.pointSpecs(specs, byDefault, p.Cadence)), Machine: machineOf(p.storageFor("")), Calibration: p.Calibration}
	for _, c := range p.Contestants {
		res.Order = append(res.Order, c.Name())
	}
	b := &bencher{Plan: p, specs: specs, byDefault: byDefault, refs: map[string]*sink.Table{},
		total: len(points) * p.Repeat * len(p.Contestants)}
	b.say("bench: seed %d; replay with: %s", p.Seed, p.Command)
	for _, pt := range points {
		for r := range p.Repeat {
			for _, c := range p.Contestants {
				rr, err := b.runOne(ctx, c, pt, r)
				if err != nil {
					return nil, err
				}
				res.Runs = append(res.Runs, *rr)
			}
		}
	}
	return res, nil
}

// validate refuses, before anything runs, a fault some contestant cannot
// take or one that comes after the input has ended.
func (p Plan) validate(specs []fault.Spec) error {
	for _, c := range p.Contestants {
		exec, ok := p.Executors[c.Executor]
		if !ok {
			return fmt.Errorf("no executor %q", c.Executor)
		}
		if err := fault.Validate(specs, exec.FailPoints(), exec.Workers(p.Config)); err != nil {
			return fmt.Errorf("%s: %w", c.Name(), err)
		}
	}
	for _, s := range specs {
		if !s.IsWorkerKill() {
			return fmt.Errorf("--fail %s: bench gives every contestant the same crash, and named points differ between executors", s)
		}
		if s.At > 0 && s.At+p.maxCadence() > p.Duration {
			return fmt.Errorf("--fail %s: with a jitter of up to one cadence (%s) the crash could come after the input ends (--duration %s)", s, p.maxCadence(), p.Duration)
		}
	}
	return nil
}

// pointSpecs are the faults of a point with the given cadence: the
// default fault after that cadence's two recovery points, or specs as
// given.
func (p Plan) pointSpecs(specs []fault.Spec, byDefault bool, cadence time.Duration) []fault.Spec {
	if !byDefault {
		return specs
	}
	return []fault.Spec{DefaultFault(p.Warmup, cadence)}
}

// maxCadence is the longest cadence of any point: the jitter's bound.
func (p Plan) maxCadence() time.Duration {
	c := p.Cadence
	for _, pt := range p.Points {
		c = max(c, pt.Cadence)
	}
	return c
}

func (p Plan) scenario(specs []fault.Spec) Scenario {
	s := Scenario{Job: p.Config.Job, Inputs: p.inputs(p.Rate, p.Config.Parallelism), SinkMode: string(p.Config.SinkMode),
		Parallelism: p.Config.Parallelism, DurationMs: msOf(p.Duration), WarmupMs: msOf(p.Warmup), Rate: p.Rate,
		CadenceMs: msOf(p.Cadence), Fault: specsText(specs), DetectDelayMs: msOf(p.Config.DetectDelay),
		AcquireDelayMs: msOf(p.Config.AcquireDelay), Repeat: p.Repeat, Seed: p.Seed, Sweep: p.Sweep,
		Workers: string(cmp.Or(p.Config.Workers, run.WorkersInproc))}
	if at := firstAt(specs); at != nil {
		s.FaultAtMs, s.JitterMs = msOf(*at), msOf(p.Cadence)
	}
	for _, pt := range p.Points {
		s.SweepPoints = append(s.SweepPoints, pt.Label)
	}
	return s
}

func (p Plan) inputs(rate float64, parallelism int) map[string]string {
	if p.Inputs != nil {
		return p.Inputs(rate, parallelism)
	}
	return GenInputs(p.Config.Job, p.Config.Seed, rate, p.Duration, parallelism)
}

// bencher is one Run under way.
type bencher struct {
	Plan
	specs []fault.Spec
	// byDefault: the fault is the default one, placed after each point's
	// own cadence (a 5 s cadence needs a later fault than a 1 s one).
	byDefault bool
	// refs are the reference's outputs by input (refKey).
	refs       map[string]*sink.Table
	seq, total int
}

func (b *bencher) say(format string, args ...any) {
	if b.Progress != nil {
		fmt.Fprintf(b.Progress, format+"\n", args...)
	}
}

// runOne runs contestant c in repeat r of point pt.
func (b *bencher) runOne(ctx context.Context, c Contestant, pt SweepPoint, r int) (*RunResult, error) {
	cadence := b.Cadence
	if pt.Cadence > 0 {
		cadence = pt.Cadence
	}
	rate := b.Rate
	if pt.Load > 0 {
		capacity, ok := b.Capacity[c.Name()]
		if !ok || capacity <= 0 {
			return nil, fmt.Errorf("load %s of %s: its capacity was not measured", pt.Label, c.Name())
		}
		rate = pt.Load * capacity
	}
	cfg := b.Config
	if pt.Parallelism > 0 {
		cfg.Parallelism = pt.Parallelism
	}
	cfg.Inputs = b.inputs(rate, cfg.Parallelism)
	want, err := b.reference(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Truncated, not rounded: an offset just under one cadence must not
	// round up to the next cycle's phase.
	offset := time.Duration(jitter(b.Seed, r, b.Repeat) * float64(cadence)).Truncate(time.Millisecond)
	cfg.Executor, cfg.Fails, cfg.Series = c.Executor, shifted(b.pointSpecs(b.specs, b.byDefault, cadence), offset), true
	if opts := b.optionsOf(c); opts != nil {
		cfg.Options = opts.WithCadence(cadence)
	}
	b.seq++
	name := fmt.Sprintf("%03d-%s-r%d", b.seq, strings.ReplaceAll(c.Name(), "/", "-"), r)
	cfg.Output, cfg.Storage = filepath.Join(b.Scratch, name, "out"), b.storageFor(name)

	rr := &RunResult{Contestant: c.Name(), Repeat: r, Seq: b.seq - 1, SweepPoint: pt.Label, CadenceMs: msOf(cadence),
		Rate: rate, Fault: specsText(cfg.Fails)}
	at := firstAt(cfg.Fails)
	if at != nil {
		rr.FaultAtMs = ptr(msOf(*at))
	}
	head := fmt.Sprintf("bench: [%d/%d] %s", b.seq, b.total, c.Name())
	if pt.Label != "" {
		head += " at " + b.Sweep + "=" + pt.Label
	}
	head += fmt.Sprintf(" repeat %d", r+1)
	switch {
	case at != nil:
		head += fmt.Sprintf(" fault at %.2fs", at.Seconds())
	case len(cfg.Fails) > 0:
		head += " fault " + rr.Fault
	default:
		head += " no fault"
	}
	if b.Progress != nil {
		fmt.Fprintf(b.Progress, "%s … ", head)
	}
	s, got, err := b.runOnce(ctx, cfg, true)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		rr.Error = err.Error()
		b.say("FAILED: %v", err)
		return rr, nil
	}
	rr.Summary, rr.Series = s, s.Series
	rr.Diff = got.Diff(want, 5)
	rr.Correct = rr.Diff == ""
	b.figures(rr, s, rate, c)
	b.say("%s", doneText(rr))
	for _, f := range s.UnfiredFaults {
		b.say("bench:   the crash %s did not fire: the input ended first", f)
	}
	if len(cfg.Fails) > 0 && !rr.SteadyState {
		b.say("bench:   not in steady state: %d recovery points completed between the warmup and the fault (the scenario wants 2)", rr.PointsBeforeFault)
	}
	return rr, nil
}

// figures fills rr's figures from its summary and series.
func (b *bencher) figures(rr *RunResult, s *report.Summary, rate float64, c Contestant) {
	faultMs := rr.FaultAtMs
	// A kill after a count of records, or one that fired before it was
	// due, is timed by the bill.
	for _, r := range s.Recoveries {
		if r.AtMs != nil && (faultMs == nil || *r.AtMs < *faultMs) {
			faultMs = ptr(*r.AtMs)
		}
	}
	if rr.Fault == "" {
		faultMs = nil
	}
	if s.Series != nil {
		w := windowOf(s.Series, msOf(b.Warmup), msOf(b.Duration), faultMs)
		rr.Figures, rr.PointsBeforeFault = steady(s.Series, w)
		rr.SteadyState = rr.PointsBeforeFault >= 2
	}
	bill(&rr.Figures, s)
	if b.Config.Workers == run.WorkersProcess {
		rr.Figures.Measured = measuredParts(s)
	}
	if capacity := b.Capacity[c.Name()]; capacity > 0 && rr.SweepPoint != "" {
		rr.Figures.PredictedCatchUp(rate, capacity)
	}
}

// doneText is the end of a run's progress line.
func doneText(rr *RunResult) string {
	f := rr.Figures
	out := fmt.Sprintf("%.1fs", f.WallMs/1000)
	if f.LatencyP99Ms != nil {
		out += fmt.Sprintf(", p99 %.1fms", *f.LatencyP99Ms)
	}
	switch {
	case f.RecoveredMs != nil:
		out += fmt.Sprintf(", recovered %.1fs", *f.RecoveredMs/1000)
	case rr.Fault != "" && rr.Summary != nil && len(rr.Summary.Recoveries) > 0:
		out += ", not caught up by the end"
	}
	if rr.Correct {
		return out + ", OK"
	}
	return out + ", WRONG RESULT: " + firstLine(rr.Diff)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// reference is the reference's output over cfg's inputs, run unpaced
// the first time they are asked for: the same records, so the same
// output, without waiting for the pace.
func (b *bencher) reference(ctx context.Context, cfg run.Config) (*sink.Table, error) {
	ins := map[string]string{}
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(cfg.Inputs)) {
		ins[n] = unpaced(cfg.Inputs[n])
		parts = append(parts, n+"="+ins[n])
	}
	key := strings.Join(parts, " ")
	if t, ok := b.refs[key]; ok {
		return t, nil
	}
	exec, err := b.referenceExec()
	if err != nil {
		return nil, err
	}
	cfg.Executor, cfg.Options, cfg.Fails, cfg.Inputs = exec.Name(), nil, nil, ins
	// The reference has no workers to put in processes.
	cfg.Workers = run.WorkersInproc
	// The output does not depend on how fast the sink takes it.
	cfg.SinkRowsPerSecond = 0
	cfg.Output = filepath.Join(b.Scratch, fmt.Sprintf("reference-%d", len(b.refs)))
	b.say("bench: reference run of %s on %s", cfg.Job, key)
	_, want, err := b.runOnce(ctx, cfg, false)
	if err != nil {
		return nil, fmt.Errorf("%s run: %w", exec.Name(), err)
	}
	b.refs[key] = want
	return want, nil
}

// referenceExec is the executor of p.Executors every contestant is
// checked against.
func (p Plan) referenceExec() (run.Executor, error) {
	for _, e := range p.Executors {
		if e.Traits().Reference {
			return e, nil
		}
	}
	return nil, errors.New("no reference executor to check the contestants against")
}

// optionsOf are the options contestant c runs with (before the cadence).
func (p Plan) optionsOf(c Contestant) run.Options {
	opts := p.Options[c.Executor]
	if opts == nil {
		opts = p.Executors[c.Executor].Traits().NoOptions
	}
	if opts == nil || c.Variant == "" {
		return opts
	}
	return opts.WithVariant(c.Variant)
}

func (p Plan) storageFor(name string) string {
	if p.Storage == "" {
		return "file://" + filepath.Join(p.Scratch, name, "storage")
	}
	return strings.TrimRight(p.Storage, "/") + "/" + name
}

// runOnce runs cfg and returns its summary and resolved output.
func (p Plan) runOnce(ctx context.Context, cfg run.Config, withStore bool) (*report.Summary, *sink.Table, error) {
	exec, ok := p.Executors[cfg.Executor]
	if !ok {
		return nil, nil, fmt.Errorf("no executor %q", cfg.Executor)
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Output), 0o755); err != nil {
		return nil, nil, err
	}
	env, err := run.Prepare(ctx, cfg, p.Alloc, p.Log, withStore, run.OutputOverwrite)
	if err != nil {
		return nil, nil, err
	}
	defer env.Close()
	env.WorkerCommand = p.WorkerCommand
	s, err := run.Execute(ctx, exec, env)
	if err != nil {
		return nil, nil, err
	}
	got, _, err := sink.Resolve(cfg.Output, env.Job.Output)
	if err != nil {
		return nil, nil, fmt.Errorf("reading back output: %w", err)
	}
	return s, got, nil
}
