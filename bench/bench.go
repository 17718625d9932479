// Package bench runs the same job under several executors with the same
// fault schedule and puts side by side what each recovery model costs:
// latency and throughput while running, and the bill after a crash
// (detect, restore, reprocess, catch up, extra wall time).
//
// Every run is also checked: its resolved output is compared with the
// reference executor's over the same input, so a fast but wrong contestant
// is reported as wrong, not as fast.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
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

// Contestant is one executor configuration under test.
type Contestant struct {
	Executor string
	// Variant is one of the executor's run.Traits.Variants (recordwise's
	// barrier mode), empty for an executor without variants.
	Variant string
}

// Name is how the contestant is written on the command line and in tables:
// the executor's name, then "/" and the variant when it has variants.
func (c Contestant) Name() string {
	if c.Variant == "" {
		return c.Executor
	}
	return c.Executor + "/" + c.Variant
}

// DefaultContestants is every executor of execs but the reference, once
// per variant, comma-separated in the order of execs.
func DefaultContestants(execs []run.Executor) string {
	var out []string
	for _, e := range execs {
		tr := e.Traits()
		switch {
		case tr.Reference:
		case len(tr.Variants.Values) == 0:
			out = append(out, e.Name())
		default:
			for _, v := range tr.Variants.Values {
				out = append(out, Contestant{e.Name(), v}.Name())
			}
		}
	}
	return strings.Join(out, ",")
}

// ParseContestants reads a comma-separated list such as
// DefaultContestants. An executor with variants named alone means its
// default variant (aligned barriers). execs are the executors that exist.
func ParseContestants(list string, execs []run.Executor) ([]Contestant, error) {
	byName := map[string]run.Executor{}
	var known, variants, varied []string
	for _, e := range execs {
		byName[e.Name()] = e
		known = append(known, e.Name())
	}
	slices.Sort(known)
	for _, name := range known {
		if vs := byName[name].Traits().Variants.Values; len(vs) > 0 {
			varied = append(varied, name)
			for _, v := range vs {
				variants = append(variants, name+"/"+v)
			}
		}
	}
	var out []Contestant
	seen := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		name, variant, _ := strings.Cut(part, "/")
		exec, ok := byName[name]
		if ok && exec.Traits().Reference {
			return nil, fmt.Errorf("invalid --executors %q: the %s executor is what every contestant is checked against, not a contestant", list, name)
		}
		if !ok {
			return nil, fmt.Errorf("invalid --executors %q: unknown executor %q (allowed: %s)", list, name, strings.Join(append(known, variants...), ", "))
		}
		vs := exec.Traits().Variants
		switch {
		case len(vs.Values) > 0 && variant == "":
			variant = vs.Values[0]
		case len(vs.Values) > 0 && !slices.Contains(vs.Values, variant):
			return nil, fmt.Errorf("invalid --executors %q: %s %s are %s, not %q", list, name, vs.Flag, strings.Join(vs.Values, " or "), variant)
		case len(vs.Values) == 0 && variant != "":
			return nil, fmt.Errorf("invalid --executors %q: only %s takes a %s (%q)", list, strings.Join(varied, " and "), variantKind(execs), part)
		}
		c := Contestant{Executor: name, Variant: variant}
		if seen[c.Name()] {
			return nil, fmt.Errorf("invalid --executors %q: %s is listed twice", list, c.Name())
		}
		seen[c.Name()] = true
		out = append(out, c)
	}
	return out, nil
}

// variantKind is what the variants of execs are called ("barrier mode"),
// or "variant" when they are of several kinds.
func variantKind(execs []run.Executor) string {
	kind := ""
	for _, e := range execs {
		switch k := e.Traits().Variants.Kind; {
		case k == "" || k == kind:
		case kind == "":
			kind = k
		default:
			return "variant"
		}
	}
	return cmp.Or(kind, "variant")
}

// Faults says which crashes the crash run of every contestant gets.
type Faults struct {
	// None skips the crash runs.
	None bool
	// Specs are worker kills, the same for every contestant. When empty
	// and None is false, worker 0 is killed once half of the reference's
	// input records have been read.
	Specs []fault.Spec
}

// Plan is one benchmark.
type Plan struct {
	// Config is the job every contestant runs; Executor, Options, Output,
	// Storage and Fails are set per run.
	Config run.Config
	// Options are each executor's options (by name) the contestants start
	// from, their variant set per contestant; an executor without them
	// starts from its run.Traits.NoOptions.
	Options     map[string]run.Options
	Contestants []Contestant
	Faults      Faults
	// Storage is the base location for durable shared storage; every run
	// gets its own sub-location. Empty means a directory under Scratch.
	Storage string
	// Scratch holds the output directories (and local storage).
	Scratch   string
	Executors map[string]run.Executor
	Alloc     memory.Allocator
	Log       *slog.Logger
	// Progress receives one human line as each run starts and ends.
	Progress io.Writer
}

// Outcome is one run of one contestant.
type Outcome struct {
	Fails   []string        `json:"fails"`
	Summary *report.Summary `json:"summary"`
	// Correct is true when the resolved output equals the reference's;
	// Diff says how it differs otherwise.
	Correct bool   `json:"correct"`
	Diff    string `json:"diff,omitempty"`
	// Error is set when the run itself failed.
	Error string `json:"error,omitempty"`
}

// Result is a contestant's crash-free run and its crash run.
type Result struct {
	Contestant string   `json:"contestant"`
	Clean      *Outcome `json:"clean"`
	Crash      *Outcome `json:"crash,omitempty"`
}

// Report is everything a benchmark measured.
type Report struct {
	Job      string            `json:"job"`
	Inputs   map[string]string `json:"inputs"`
	SinkMode string            `json:"sink_mode"`
	Started  time.Time         `json:"started"`
	CPUs     int               `json:"cpus"`
	// Reference is the failure-free run every result is checked against.
	Reference *report.Summary `json:"reference_run"`
	Results   []Result        `json:"results"`
}

// Failed reports whether any run failed or produced a wrong result.
func (r *Report) Failed() bool {
	for _, res := range r.Results {
		for _, o := range []*Outcome{res.Clean, res.Crash} {
			if o != nil && (o.Error != "" || !o.Correct) {
				return true
			}
		}
	}
	return false
}

// Run runs the reference once, then every contestant crash-free and (unless
// Faults.None) with the fault schedule. A contestant's failure is recorded
// in its Outcome and the benchmark goes on; Run returns an error only when
// the benchmark itself cannot proceed (bad input, unreachable storage, the
// reference failing, ctx cancelled).
func Run(ctx context.Context, p Plan) (*Report, error) {
	rep := &Report{Job: p.Config.Job, Inputs: p.Config.Inputs, SinkMode: string(p.Config.SinkMode),
		Started: time.Now().UTC(), CPUs: runtime.GOMAXPROCS(0)}
	if _, err := job.Build(p.Config.Job, p.Config.Params); err != nil {
		return nil, err
	}
	total := len(p.Contestants)
	if !p.Faults.None {
		total *= 2
	}
	step := 0
	say := func(format string, args ...any) {
		if p.Progress != nil {
			fmt.Fprintf(p.Progress, format+"\n", args...)
		}
	}

	// Refuse a schedule some contestant cannot carry out before running
	// anything. The default (worker 0) exists everywhere.
	for _, c := range p.Contestants {
		exec, ok := p.Executors[c.Executor]
		if !ok {
			return nil, fmt.Errorf("no executor %q", c.Executor)
		}
		if err := fault.Validate(p.Faults.Specs, exec.FailPoints(), exec.Workers(p.Config)); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name(), err)
		}
	}

	refExec, err := p.reference()
	if err != nil {
		return nil, err
	}
	say("bench: reference run of %s", p.Config.Job)
	refCfg := p.Config
	refCfg.Executor, refCfg.Options, refCfg.Output = refExec.Name(), nil, filepath.Join(p.Scratch, refExec.Name())
	ref, want, err := p.runOnce(ctx, refCfg, false)
	if err != nil {
		return nil, fmt.Errorf("%s run: %w", refExec.Name(), err)
	}
	rep.Reference = ref

	specs := p.Faults.Specs
	if !p.Faults.None && len(specs) == 0 {
		if ref.RecordsIn < 2 {
			return nil, fmt.Errorf("the input has %d records: too few to crash half-way", ref.RecordsIn)
		}
		specs = []fault.Spec{{Worker: 0, AfterRecords: ref.RecordsIn / 2}}
	}

	for _, c := range p.Contestants {
		res := Result{Contestant: c.Name()}
		type benchRun struct {
			kind  string
			fails []fault.Spec
			out   **Outcome
		}
		runs := []benchRun{{"crash-free", nil, &res.Clean}}
		if !p.Faults.None {
			runs = append(runs, benchRun{"with crash", specs, &res.Crash})
		}
		for _, r := range runs {
			step++
			say("bench: [%d/%d] %s %s", step, total, c.Name(), r.kind)
			cfg := p.Config
			cfg.Executor, cfg.Options, cfg.Fails = c.Executor, p.optionsOf(c), r.fails
			name := strings.ReplaceAll(c.Name(), "/", "-") + "-" + strings.ReplaceAll(r.kind, " ", "-")
			cfg.Output = filepath.Join(p.Scratch, name, "out")
			cfg.Storage = p.storageFor(name)
			o := &Outcome{Fails: specStrings(r.fails)}
			s, got, err := p.runOnce(ctx, cfg, true)
			switch {
			case ctx.Err() != nil:
				return nil, ctx.Err()
			case err != nil:
				o.Error = err.Error()
				say("bench:   failed: %v", err)
			default:
				o.Summary = s
				o.Diff = got.Diff(want, 5)
				o.Correct = o.Diff == ""
				say("bench:   %.0f ms, %.0f records/s%s", s.WallMs, s.ThroughputRPS, map[bool]string{true: "", false: ", WRONG RESULT"}[o.Correct])
				for _, f := range s.UnfiredFaults {
					say("bench:   the crash %s did not fire: the input ended first", f)
				}
			}
			*r.out = o
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// reference is the executor of p.Executors every contestant is checked
// against.
func (p Plan) reference() (run.Executor, error) {
	for _, e := range p.Executors {
		if e.Traits().Reference {
			return e, nil
		}
	}
	return nil, errors.New("no reference executor to check the contestants against")
}

// optionsOf are the options contestant c runs with.
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

func specStrings(specs []fault.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return out
}
