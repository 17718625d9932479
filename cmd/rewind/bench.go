package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
)

type benchFlags struct {
	runFlags
	contestants string
	report      string
	scratch     string
	keep        bool
}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &benchFlags{runFlags: runFlags{barriers: "aligned", output: "-"}}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the same job under every executor with one fault schedule and compare the costs",
		Long: `bench runs the reference executor once, then every contestant twice on the
same input: once crash-free, once with the same fault schedule (by default
worker 0 is killed when half of the input has been read). It prints latency
and throughput while running, the recovery bill after the crash, and checks
every resolved output against the reference's. Exit status 1 when a run
failed or produced a wrong result.`,
		Example: `  rewind bench                                      # keyed-count, every executor
  rewind bench --job windowed-sum --sink-mode transactional --report bench-report
  rewind bench --executors recordwise/aligned,recordwise/unaligned --fail worker=1,after-records=200000
  rewind bench --fail none --summary json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.bench(cmd, stdout, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.contestants, "executors", bench.DefaultContestants(registry), "contestants, comma-separated; recordwise takes /aligned or /unaligned")
	fl.StringArrayVar(&f.fails, "fail", nil, "crash for every contestant's crash run: worker=W,after-records=N[,after-point=NAME] (repeatable; a point every contestant has), or none (default: worker 0 at half the input)")
	fl.StringVar(&f.report, "report", "", "also write report.md, report.json and plots into this directory")
	fl.StringVar(&f.scratch, "scratch", "", "directory for outputs and local storage (default: a temporary one, removed afterwards)")
	fl.BoolVar(&f.keep, "keep", false, "keep the scratch directory (outputs and storage of every run)")
	fl.StringVar(&f.summary, "summary", "text", "result format: text, json (json is the last line of stdout)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log executor details to stderr")
	f.addJobFlags(fl)
	return cmd
}

// benchInputs are the generated inputs of a benchmark: paced, so latency
// means something (an unpaced source measures queueing, not the executor),
// and short enough that every contestant runs twice in under a minute.
func benchInputs(jobName string, seed int64) map[string]string {
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=100000,keys=100000,rate=50000,seed=%d", seed),
			job.InputPayments: fmt.Sprintf("gen:records=100000,keys=100000,rate=50000,seed=%d", seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=500000,keys=1000,rate=250000,seed=%d", seed)}
}

func (f *benchFlags) bench(cmd *cobra.Command, stdout, stderr io.Writer) error {
	cfg, _, err := f.config(nil)
	if err != nil {
		return err
	}
	if len(f.inputs) == 0 {
		cfg.Inputs = benchInputs(cfg.Job, cfg.Seed)
	}
	contestants, err := bench.ParseContestants(f.contestants, registry)
	if err != nil {
		return usageError{err}
	}
	var names []string
	for _, c := range contestants {
		if !slices.Contains(names, c.Executor) {
			names = append(names, c.Executor)
		}
	}
	if err := checkExecutorFlags(cmd.Flags(), names...); err != nil {
		return err
	}
	faults := bench.Faults{None: f.noFails, Specs: cfg.Fails}
	for _, s := range faults.Specs {
		if !s.IsWorkerKill() {
			return usagef("invalid --fail %s: bench gives every executor the same crash, and named points differ between executors; use worker=W,after-records=N[,after-point=NAME]", s)
		}
	}
	for _, c := range contestants {
		exec := executors[c.Executor]
		if err := fault.Validate(faults.Specs, exec.FailPoints(), exec.Workers(cfg)); err != nil {
			return usageError{fmt.Errorf("%s: %w", c.Name(), err)}
		}
	}
	scratch := f.scratch
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "rewind-bench-"); err != nil {
			return err
		}
		if !f.keep {
			defer os.RemoveAll(scratch)
		}
	} else if err := os.MkdirAll(scratch, 0o755); err != nil {
		return usagef("invalid --scratch %s: %v", scratch, err)
	}
	storage := ""
	if cmd.Flags().Changed("storage") {
		storage = cfg.Storage
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelInfo
	}
	rep, err := bench.Run(cmd.Context(), bench.Plan{
		Config: cfg, Contestants: contestants, Faults: faults, Storage: storage, Scratch: scratch,
		Executors: executors, Options: f.allOptions(), Alloc: memory.NewGoAllocator(),
		Log:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Progress: stderr,
	})
	if err != nil {
		return err
	}
	if f.keep || f.scratch != "" {
		fmt.Fprintf(stderr, "bench: outputs and storage of every run are in %s\n", scratch)
	}
	if f.report != "" {
		if err := rep.WriteReport(f.report); err != nil {
			return fmt.Errorf("writing the report: %w", err)
		}
		fmt.Fprintf(stderr, "bench: report written to %s\n", strings.TrimRight(f.report, "/")+"/report.md")
	}
	if f.summary == "json" {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("at least one run failed or differed from the reference (see the problems listed above)")
	}
	return nil
}
