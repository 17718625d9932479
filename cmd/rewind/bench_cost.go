package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// newBenchCostCmd is `rewind bench cost`: McSherry's COST, how many cores
// each executor needs to beat one good thread.
func newBenchCostCmd(stdout, stderr io.Writer) *cobra.Command {
	var jobs, contestants, pars, out, sinkMode, workers string
	var records int64
	var repeat int
	var seed int64
	var verbose bool
	cmd := &cobra.Command{
		Use:   "cost",
		Short: "Unpaced throughput of every executor at parallelism 1 and 2 against one thread (COST)",
		Long: `cost runs every contestant over the same bounded generated input as fast as
it can, without a crash, at each --parallelism, and sets its throughput
(input records over the run's wall time) against the single-threaded
reference executor's over the same input in the same run: a ratio of 1 is
where a parallel run starts to pay for its cores (McSherry, Isard and
Murray's COST). Every output is checked against the reference's; a wrong
one is flagged. The executors run with their default settings (recordwise
checkpoints every 1s, diskphase one finite job), but microbatch runs its
batches back to back (--trigger 0), as fast as they go. With --workers inproc,process every contestant that can runs
a second time with its workers as processes of this binary, and the table
sets that throughput against its inproc one (× inproc).

Writes cost.json, cost.csv and cost.svg/png into --out and prints the
table. Exit status 1 when a run failed or produced a wrong result.`,
		Example: `  rewind bench cost                                   # every job, every executor, parallelism 1 and 2
  rewind bench cost --jobs keyed-count --records 4000000 --repeat 3
  rewind bench cost --jobs keyed-count --parallelism 2 --workers inproc,process`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			js, err := parseJobs(jobs)
			if err != nil {
				return err
			}
			var ps []int
			for _, s := range strings.Split(pars, ",") {
				p, err := strconv.Atoi(s)
				if err != nil || p < 1 || p > 128 {
					return usagef("invalid --parallelism %q: comma-separated numbers in 1..128", s)
				}
				ps = append(ps, p)
			}
			switch {
			case records < 1000:
				return usagef("invalid --records %d: at least 1000, for a throughput worth the name", records)
			case repeat < 1:
				return usagef("invalid --repeat %d: must be at least 1", repeat)
			case out == "":
				return usagef("invalid --out: must name a directory")
			}
			cs, err := bench.ParseContestants(contestants, registry)
			if err != nil {
				return usageError{err}
			}
			modes, err := parseWorkerModes(workers)
			if err != nil {
				return err
			}
			if slices.Contains(modes, run.WorkersProcess) {
				if _, err := processContestants(run.Config{Workers: run.WorkersProcess}, cs, fl.Changed("executors"), stderr); err != nil {
					return err
				}
			}
			// The executors' defaults, as rewind run has them.
			f := &runFlags{barriers: "aligned", summary: "text"}
			f.addJobFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError))
			f.sinkMode, f.seed, f.output = sinkMode, seed, "-"
			// COST asks how fast: microbatch runs its batches back to
			// back, as Spark does without a trigger, or the table would
			// measure its trigger interval.
			f.trigger = 0
			cfg, _, err := f.config(nil)
			if err != nil {
				return err
			}
			scratch, err := os.MkdirTemp("", "rewind-cost-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(scratch)
			p := bench.CostPlan{Jobs: js, Parallelisms: ps, Records: records, Workers: modes,
				Plan: bench.Plan{Config: cfg, Contestants: cs, Options: f.allOptions(), Repeat: repeat, WorkerCommand: f.workerCommand(cfg),
					Command: replayCommandOf(fl, "rewind bench cost"), Scratch: scratch, Executors: executors,
					Alloc: memory.NewGoAllocator(), Log: traceLogger(verbose, stderr), Progress: stderr}}
			res, err := bench.RunCost(cmd.Context(), p)
			if err != nil {
				return err
			}
			failed := ""
			for _, row := range res.Rows {
				if row.Error != "" || row.Wrong > 0 {
					failed = "at least one run failed or differed from the reference (see the table)"
				}
			}
			return reportBench(res, "cost", out, stdout, stderr, failed)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&jobs, "jobs", strings.Join(job.Names(), ","), "jobs, comma-separated")
	fl.StringVar(&contestants, "executors", bench.DefaultContestants(registry), "contestants, comma-separated; recordwise takes /aligned or /unaligned")
	fl.StringVar(&pars, "parallelism", "1,2", "parallelisms to run every contestant at, comma-separated")
	fl.Int64Var(&records, "records", bench.DefaultCostRecords, "input records per run (summed over the job's inputs)")
	fl.IntVar(&repeat, "repeat", 1, "runs of everything, interleaved; the figures are medians")
	fl.StringVar(&sinkMode, "sink-mode", "append", "delivery contract: append, idempotent, transactional")
	fl.Int64Var(&seed, "seed", 1, "seed of the generated input")
	fl.StringVar(&out, "out", "rewind-bench/cost", "directory for cost.json, cost.csv and the figure")
	fl.StringVar(&workers, "workers", "inproc", "where the contestants' workers run: inproc, process (real worker processes), or inproc,process for both in one run (× inproc is then the price of the process boundary)")
	fl.BoolVarP(&verbose, "verbose", "v", false, "log executor details to stderr")
	return cmd
}

// benchResults is what a bench subcommand measured: written as files, then
// printed as a Markdown table.
type benchResults interface {
	WriteDir(dir string) ([]string, error)
	WriteTable(w io.Writer) error
}

// reportBench writes res into out and its table to stdout, and fails the
// command when failed says a run failed, after everything is written.
func reportBench(res benchResults, name, out string, stdout, stderr io.Writer, failed string) error {
	files, err := res.WriteDir(out)
	if err != nil {
		return fmt.Errorf("writing the results into %s: %w", out, err)
	}
	fmt.Fprintf(stderr, "bench %s: wrote %s\n", name, strings.Join(files, ", "))
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if failed != "" {
		return errors.New(failed)
	}
	return nil
}

// parseJobs is a --jobs list of built-in job names, comma-separated.
func parseJobs(list string) ([]string, error) {
	js := strings.Split(list, ",")
	for _, j := range js {
		if !slices.Contains(job.Names(), j) {
			return nil, usagef("invalid --jobs %q: allowed are %s", j, strings.Join(job.Names(), ", "))
		}
	}
	return js, nil
}
