package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// newTraceCmd runs a tiny job with one crash and tells its story from the
// executor's own progress events: where the markers went and how long each
// step of a recovery point took, what was in flight, what the crash cost
// and what was read again.
func newTraceCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &runFlags{executor: defaultExecutor, summary: "text"}
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Run a tiny job with one crash and show, step by step, how its executor recovers",
		Long: `trace runs a small paced input through one executor, kills a worker half-way
(for recordwise and diskphase not before the first recovery point is
durable; --fail chooses another crash or none) and prints a timeline built
from the executor's progress events: for recordwise, every checkpoint with,
per task, when its marker arrived, how long alignment, the synchronous
copy and the asynchronous write took, and the in-flight records persisted; for microbatch, every batch with
its logged offsets and step durations; for diskphase, every finite job with
its units run and re-run. Then the crash, the recovery point restored and the
records read again, and whether the result equals the reference executor's.`,
		Example: `  rewind trace                                   # recordwise, unaligned barriers
  rewind trace --barriers aligned --alignment-timeout 5ms
  rewind trace --executor microbatch --lost-piece-recovery rerun-batch
  rewind trace --executor diskphase --job windowed-sum --window 100ms`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.trace(cmd, stdout, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.executor, "executor", f.executor, "recovery model: "+strings.Join(recoveryExecutors(), ", "))
	fl.StringVar(&f.barriers, "barriers", "unaligned", "recordwise barrier handling: aligned, unaligned")
	fl.StringArrayVar(&f.fails, "fail", nil, "crash to inject (repeatable), or none; default: worker 1 at half the input (recordwise, diskphase: and once the first recovery point is durable)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log executor details to stderr")
	f.addJobFlags(fl)
	return cmd
}

// traceInputs is 400 ms of paced input over two partitions: enough for
// several recovery points, short enough to read, and long enough that a
// slow machine (or -race) completes the first checkpoint before it ends,
// which the default crash waits for.
func traceInputs(jobName string, seed int64) map[string]string {
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=2000,keys=50,partitions=2,rate=5000,seed=%d", seed),
			job.InputPayments: fmt.Sprintf("gen:records=2000,keys=50,partitions=2,rate=5000,seed=%d", seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=4000,keys=8,partitions=2,rate=10000,seed=%d", seed)}
}

func (f *runFlags) trace(cmd *cobra.Command, stdout, stderr io.Writer) error {
	exec, ok := executors[f.executor]
	if !ok || exec.Traits().Reference {
		return usagef("invalid --executor %q: allowed are %s", f.executor, strings.Join(slices.Sorted(slices.Values(recoveryExecutors())), ", "))
	}
	fl := cmd.Flags()
	if err := checkExecutorFlags(fl, exec.Name()); err != nil {
		return err
	}
	// Small steps, so a short run shows several of them.
	for name, set := range map[string]func(){
		"checkpoint-interval": func() { f.checkpointInterval = 100 * time.Millisecond },
		"trigger":             func() { f.trigger = 50 * time.Millisecond },
		"job-records":         func() { f.jobRecords = 1000 },
	} {
		if !fl.Changed(name) {
			set()
		}
	}
	dir, err := os.MkdirTemp("", "rewind-trace-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	f.output = filepath.Join(dir, "out")
	cfg, j, err := f.config(exec)
	if err != nil {
		return err
	}
	if len(f.inputs) == 0 {
		cfg.Inputs = traceInputs(cfg.Job, cfg.Seed)
	}
	if !fl.Changed("storage") {
		cfg.Storage = "file://" + filepath.Join(dir, "storage")
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx := cmd.Context()

	// The reference gives the right answer and the input's size.
	refExec := referenceExecutor()
	refCfg := cfg
	refCfg.Executor, refCfg.Options, refCfg.Output, refCfg.Fails = refExec.Name(), nil, filepath.Join(dir, refExec.Name()), nil
	refEnv, err := run.Prepare(ctx, refCfg, memory.NewGoAllocator(), log, false, run.OutputOverwrite)
	if err != nil {
		return err
	}
	ref, err := run.Execute(ctx, refExec, refEnv)
	refEnv.Close()
	if err != nil {
		return err
	}
	// The default crash waits for the point that makes the first recovery
	// point durable as well as for half the input, so the story shows a
	// recovery from a recovery point however slowly the machine runs the
	// first one (should the input end before, trace says so and fails).
	if !f.noFails && len(cfg.Fails) == 0 {
		cfg.Fails = []fault.Spec{{Worker: min(1, exec.Workers(cfg)-1), AfterRecords: max(ref.RecordsIn/2, 1),
			AfterPoint: exec.Traits().FirstDurablePoint}}
		if err := fault.Validate(cfg.Fails, exec.FailPoints(), exec.Workers(cfg)); err != nil {
			return fmt.Errorf("trace's default crash: %w", err)
		}
	}

	tl := report.NewTimeline()
	cfg.Progress = tl
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), log, true, run.OutputOverwrite)
	if err != nil {
		return err
	}
	defer env.Close()
	s, err := run.Execute(ctx, exec, env)
	if err != nil {
		return err
	}
	if s.Interrupted {
		// A partial output compared with the reference would read as a
		// wrong result.
		return errInterrupted
	}
	want, _, err := sink.Resolve(refCfg.Output, j.Output)
	if err != nil {
		return err
	}
	got, _, err := sink.Resolve(cfg.Output, j.Output)
	if err != nil {
		return err
	}

	w := stdout
	fmt.Fprintf(w, "trace: %s on %s", cfg.Job, exec.Name())
	if v := exec.Traits().Variants; len(v.Values) > 0 && cfg.Options != nil {
		fmt.Fprintf(w, " (%s %s)", cfg.Options.Variant(), v.Flag)
	}
	fmt.Fprintf(w, ", parallelism %d, input %s\n", cfg.Parallelism, strings.Join(sortedSpecs(cfg.Inputs), " "))
	if len(cfg.Fails) > 0 {
		parts := make([]string, len(cfg.Fails))
		for i, sp := range cfg.Fails {
			parts[i] = sp.String()
		}
		fmt.Fprintf(w, "crash: %s\n", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	for _, ev := range tl.Events() {
		fmt.Fprint(w, describeEvent(ev))
	}
	fmt.Fprintln(w)
	if err := s.WriteText(w); err != nil {
		return err
	}
	if d := got.Diff(want, 5); d != "" {
		return fmt.Errorf("the result differs from the reference executor's:\n%s", d)
	}
	fmt.Fprintf(w, "result: equals the reference executor's (%d rows)\n", len(want.Rows))
	if len(s.UnfiredFaults) > 0 {
		// A trace asked to show a crash that shows none has not done its
		// job, whatever its result.
		return fmt.Errorf("the crash %s did not fire before the input ended (the first recovery point came later), so the trace shows no recovery: give a slower --input (a lower rate=) or another --fail", s.UnfiredFaults[0])
	}
	return nil
}

func sortedSpecs(in map[string]string) []string {
	out := make([]string, 0, len(in))
	for name, spec := range in {
		out = append(out, name+"="+spec)
	}
	sort.Strings(out)
	return out
}

// describeEvent renders one progress event as a few indented lines. Unknown
// events are shown raw, so nothing an executor reports is hidden.
func describeEvent(ev report.TimedEvent) string {
	var b strings.Builder
	at := fmt.Sprintf("%8.1f ms  ", float64(ev.At.Microseconds())/1000)
	var e map[string]any
	_ = json.Unmarshal(ev.Raw, &e)
	num := func(k string) float64 { v, _ := e[k].(float64); return v }
	switch ev.Event {
	case "checkpoint":
		status, _ := e["status"].(string)
		fmt.Fprintf(&b, "%scheckpoint %.0f %s: ", at, num("id"), strings.ToUpper(status))
		// A point whose completion was only noticed at restore has no
		// timing: the coordinator that would have measured it died.
		if num("trigger_ms") > 0 || num("duration_ms") > 0 {
			fmt.Fprintf(&b, "triggered at %.1f ms, took %.1f ms; ", num("trigger_ms"), num("duration_ms"))
		}
		fmt.Fprintf(&b, "state %.0f B, in flight %.0f records (%.0f B)", num("state_bytes"), num("in_flight_records"), num("in_flight_bytes"))
		if r, ok := e["reason"].(string); ok && r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
		b.WriteString("\n")
		tasks, _ := e["tasks"].([]any)
		for _, t := range tasks {
			m, _ := t.(map[string]any)
			f := func(k string) float64 { v, _ := m[k].(float64); return v }
			mode := "aligned"
			if u, _ := m["unaligned"].(bool); u {
				mode = "unaligned"
			}
			fmt.Fprintf(&b, "%14s%-10v marker after %5.1f ms, %s in %.2f ms, copy %.2f ms, write %.2f ms, state %.0f B, in flight %.0f records\n",
				"", m["task"], f("start_delay_ms"), mode, f("alignment_ms"), f("sync_ms"), f("async_ms"), f("state_bytes"), f("in_flight_records"))
		}
	case "batch":
		d, _ := e["durations_ms"].(map[string]any)
		g := func(k string) float64 { v, _ := d[k].(float64); return v }
		rerun := ""
		if r, _ := e["rerun"].(bool); r {
			rerun = " (RE-RUN)"
		}
		fmt.Fprintf(&b, "%sbatch %.0f%s: %.0f rows; offsets logged %.1f ms, run %.1f ms, state %.1f ms, sink %.1f ms, commit logged %.1f ms\n",
			at, num("batch_id"), rerun, num("input_rows"), g("offsets_log"), g("run"), g("state_commit"), g("sink"), g("commit_log"))
		srcs, _ := e["sources"].([]any)
		var ranges []string
		for _, sv := range srcs {
			m, _ := sv.(map[string]any)
			ranges = append(ranges, fmt.Sprintf("%v/%v [%v, %v)", m["input"], m["partition"], m["start_offset"], m["end_offset"]))
		}
		if len(ranges) > 0 {
			fmt.Fprintf(&b, "%14soffsets %s\n", "", strings.Join(ranges, "  "))
		}
	case "job_committed":
		fmt.Fprintf(&b, "%sfinite job %.0f committed: %.0f records, %.0f units run (%.0f re-run), %.0f records re-read, %.0f B materialised in %.0f files\n",
			at, num("job"), num("records"), num("units_run"), num("units_rerun"), num("records_reread"), num("bytes_materialised"), num("files_materialised"))
	case "progress":
		fmt.Fprintf(&b, "%sprogress: %.0f records read, %.0f rows out, %.0f records/s\n",
			at, num("records_in"), num("rows_out"), num("input_rows_per_second"))
	case "crash":
		fmt.Fprintf(&b, "%sCRASH: %v\n", at, e["cause"])
	case "recovery":
		from := ""
		if v, ok := e["from_checkpoint"].(float64); ok {
			from = fmt.Sprintf(" from checkpoint %.0f", v)
			if v == 0 {
				from = " from the start of the input"
			}
		}
		fmt.Fprintf(&b, "%sRECOVERED%s: detect %.1f ms, restore %.1f ms, %.0f records to read again\n",
			at, from, num("detect_ms"), num("restore_ms"), num("reprocessed_records"))
	case "lost_pieces":
		fmt.Fprintf(&b, "%slost pieces (%v): %.0f lost, %.0f rebuilt, %.0f records re-read in %.1f ms\n",
			at, e["recovery"], num("pieces_lost"), num("pieces_rebuilt"), num("records_reread"), num("rebuild_ms"))
	default:
		fmt.Fprintf(&b, "%s%s %s\n", at, ev.Event, ev.Raw)
	}
	return b.String()
}
