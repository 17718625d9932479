package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// Trace's own defaults: small steps, so a short run shows several of
// each. --help shows these, not run's.
var traceDefaults = map[string]string{
	"checkpoint-interval": "100ms",
	"trigger":             "50ms",
	"job-records":         "20",
}

// traceBatches is about how many micro-batches trace's input lasts at
// its trigger (400 ms / 50 ms).
const traceBatches = 8

// Output formats of trace.
var traceFormats = []string{"text", "svg", "html", "json", "log"}

// newTraceCmd runs a tiny job with one crash and draws it as a time-space
// diagram from the executor's own events: one lane per task, time left to
// right, the batches, markers, snapshots, seams or units, the crash, the
// restore and the replay.
func newTraceCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &runFlags{executor: defaultExecutor, summary: "text"}
	var format, out, teach string
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Run a tiny job with one crash and draw how its executor recovers",
		Long: `trace runs a small paced input (60 records over two partitions) through one
executor, kills a worker half-way (for recordwise and diskphase not before
the first recovery point is durable; --fail chooses another crash or none)
and draws the run as a time-space diagram from the executor's own events:
one lane per task, time left to right, record batches between lanes,
markers on every channel they cross, alignment blocking, snapshots started
and durable, in-flight records kept, recovery points complete or failed,
micro-batch seams and commits, disk-phase units and their re-runs, lost
pieces rebuilt, the crash, the restore and the replay. Then whether the
result equals the reference executor's.

Formats: text (lanes folded to 80 columns, then the key moments and the
bill), svg, html (the SVG with a caption, self-contained), json (the raw
lanes and events, times in microseconds), log (the executor's progress
events as a timeline, with per-task checkpoint timings).`,
		Example: `  rewind trace                                   # recordwise, unaligned barriers
  rewind trace --barriers aligned --job join --format svg --out aligned.svg
  rewind trace --executor microbatch --lost-piece-recovery rerun-batch
  rewind trace --executor diskphase --format html --out diskphase.html
  rewind trace --format log                      # the progress events in full
  rewind trace --teach list                      # the classic mistakes, runnable`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(traceFormats, format) {
				return usagef("invalid --format %q: allowed are %s", format, strings.Join(traceFormats, ", "))
			}
			if out != "" {
				// Refused before the run, not after it.
				if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
					return usagef("invalid --out %s: no directory %s to write it in", out, filepath.Dir(out))
				}
			}
			to := traceOutput{format: format, path: out}
			if teach != "" {
				if err := f.traceWorkers(cmd.Flags(), nil, &run.Config{}); err != nil {
					return err
				}
				return f.teach(cmd.Context(), cmd.Flags(), teach, to, stdout, stderr)
			}
			return f.trace(cmd, to, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.executor, "executor", f.executor, "recovery model: "+strings.Join(recoveryExecutors(), ", "))
	fl.StringVar(&f.barriers, "barriers", "unaligned", "recordwise barrier handling: aligned, unaligned")
	fl.StringArrayVar(&f.fails, "fail", nil, "crash to inject (repeatable), or none; default: worker 1 at half the input (recordwise, diskphase: and once the first recovery point is durable)")
	fl.StringVar(&format, "format", "text", "output: "+strings.Join(traceFormats, ", "))
	fl.StringVar(&teach, "teach", "", "run the classic mistake `NAME` beside the right way and show the difference it makes (list: what there is)")
	fl.StringVarP(&out, "out", "o", "", "write the output to `FILE` instead of stdout")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log executor details to stderr")
	f.addJobFlags(fl)
	for name, v := range traceDefaults {
		flag := fl.Lookup(name)
		if err := flag.Value.Set(v); err != nil {
			panic(err) // a default above that does not parse
		}
		flag.DefValue = v
	}
	return cmd
}

// traceInputs is 60 records paced over 400 ms in two partitions: few
// enough that the diagram draws every batch, long enough for several
// recovery points, and slow enough that a slow machine (or -race)
// completes the first checkpoint before the input ends, which the default
// crash waits for.
func traceInputs(jobName string, seed int64) map[string]string {
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=30,keys=4,partitions=2,rate=75,seed=%d", seed),
			job.InputPayments: fmt.Sprintf("gen:records=30,keys=4,partitions=2,rate=75,seed=%d", seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=60,keys=4,partitions=2,rate=150,seed=%d", seed)}
}

func (f *runFlags) trace(cmd *cobra.Command, to traceOutput, stdout, stderr io.Writer) error {
	exec, ok := executors[f.executor]
	if !ok || exec.Traits().Reference {
		return usagef("invalid --executor %q: allowed are %s", f.executor, strings.Join(slices.Sorted(slices.Values(recoveryExecutors())), ", "))
	}
	fl := cmd.Flags()
	if err := checkExecutorFlags(fl, exec.Name()); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rewind-trace-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f.output = filepath.Join(dir, "out")
	cfg, _, err := f.config(exec)
	if err != nil {
		return err
	}
	if err := f.traceWorkers(fl, exec, &cfg); err != nil {
		return err
	}
	if len(f.inputs) == 0 {
		cfg.Inputs = traceInputs(cfg.Job, cfg.Seed)
	}
	if !fl.Changed("storage") {
		cfg.Storage = "file://" + filepath.Join(dir, "storage")
	}
	log := traceLogger(f.verbose, stderr)
	ctx := cmd.Context()

	// The reference gives the right answer and the input's size.
	refExec := referenceExecutor()
	refCfg := cfg
	refCfg.Executor, refCfg.Options, refCfg.Output, refCfg.Fails = refExec.Name(), nil, filepath.Join(dir, refExec.Name()), nil
	refCfg.Workers = run.WorkersInproc // it has no workers to move
	ref, err := runTraced(ctx, refExec, refCfg, nil, nil, log)
	if err != nil {
		return err
	}
	// The default crash waits for the point that makes the first recovery
	// point durable as well as for half the input, so the story shows a
	// recovery from a recovery point however slowly the machine runs the
	// first one (should the input end before, trace says so and fails).
	if !f.noFails && len(cfg.Fails) == 0 {
		if cfg.Fails, err = traceCrash(exec, cfg, ref.summary.RecordsIn); err != nil {
			return err
		}
	}

	t, err := runTraced(ctx, exec, cfg, nil, f.workerCommand(cfg), log)
	if err != nil {
		return err
	}
	s := t.summary
	story := traceStory{cfg: cfg, exec: exec, summary: s, rec: t.rec, timeline: t.timeline}
	if d := t.result.Diff(ref.result, 5); d != "" {
		story.diff = d
	} else {
		story.rows = len(ref.result.Rows)
	}
	if err := to.write(story, stdout, stderr); err != nil {
		return err
	}
	if story.diff != "" {
		return fmt.Errorf("the result differs from the reference executor's:\n%s", story.diff)
	}
	if len(s.UnfiredFaults) > 0 {
		// A trace asked to show a crash that shows none has not done its
		// job, whatever its result.
		return fmt.Errorf("the crash %s did not fire before the input ended (the first recovery point came later), so the trace shows no recovery: give a slower --input (a lower rate=) or another --fail", s.UnfiredFaults[0])
	}
	return nil
}

// traceCrash is trace's default crash for exec on cfg, whose input is
// recordsIn records long: worker 1 at half the input once the first
// recovery point is durable, or inside a batch about half-way where the
// executor has a mid-work point.
func traceCrash(exec run.Executor, cfg run.Config, recordsIn int64) ([]fault.Spec, error) {
	tr, worker := exec.Traits(), min(1, exec.Workers(cfg)-1)
	fails := []fault.Spec{{Worker: worker, AfterRecords: max(recordsIn/2, 1), AfterPoint: tr.FirstDurablePoint}}
	if tr.MidWorkPoint != "" {
		// Inside a batch, a quarter of the way: the input lasts about
		// traceBatches units of work at trace's cadence on a quiet
		// machine, and fewer, larger ones on a busy one (half-way was not
		// always reached there).
		fails = []fault.Spec{{Point: tr.MidWorkPoint, Worker: worker, OnlyWorker: true, Occurrence: traceBatches / 4}}
	}
	if err := fault.Validate(fails, exec.FailPoints(), exec.Workers(cfg)); err != nil {
		return nil, fmt.Errorf("trace's default crash: %w", err)
	}
	return fails, nil
}

func sortedSpecs(in map[string]string) []string {
	out := make([]string, 0, len(in))
	for name, spec := range in {
		out = append(out, name+"="+spec)
	}
	sort.Strings(out)
	return out
}

// traceWorkers puts --workers into cfg for trace: a diagram is drawn
// from the events this process holds, so process mode is for an
// executor whose every event arrives here stamped where it happened
// (Traits.ProcessTrace). exec nil is a lesson (--teach), whose
// mistake runs inside the workers and does not travel to a worker
// process, so lessons stay inproc.
func (f *runFlags) traceWorkers(fl *pflag.FlagSet, exec run.Executor, cfg *run.Config) error {
	if err := f.workerSettings(fl, cfg); err != nil {
		return err
	}
	if cfg.Workers != run.WorkersProcess {
		return nil
	}
	if exec == nil {
		return usagef("invalid --workers process with --teach: a lesson's mistake runs inside the workers and does not travel to a worker process; use --workers inproc for lessons")
	}
	var err error
	if cfg.Workers, err = f.workerMode(exec); err != nil {
		return err
	}
	if !exec.Traits().ProcessTrace {
		return usagef("invalid --workers process: %s's diagram would miss what runs inside its worker processes, which do not send their events; use --workers inproc here, and rewind run or rewind bench --workers process to measure a real kill", exec.Name())
	}
	return nil
}
