package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/bench"
)

// newBenchLatencyCmd is `rewind bench latency`: issue #16's latency table,
// each row one `rewind run` the user can paste.
func newBenchLatencyCmd(stdout, stderr io.Writer) *cobra.Command {
	var out, workers string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "latency",
		Short: "End-to-end latency of each executor at its design setting, every sink mode, as rewind run prints it",
		Long: `latency runs, for every executor, keyed-count over 100k keys in 2
partitions at parallelism 2 on local disk, with each sink mode: microbatch
with a 10ms trigger at 1M records/s (target p99 <= 30 ms), recordwise with
aligned barriers, 1s checkpoints and a 1ms buffer timeout at 100k records/s
(target p99 <= 5 ms; with the transactional sink rows are published by the
checkpoint that covers them, so its latency is bounded by the checkpoint
interval instead), and diskphase with a finite job per 100ms of input at
100k records/s (no target: a row waits for its job's interval and its job).

Each row is one 'rewind run ... --summary json' started as a child
process of this binary; its p50/p99/max latency (hand-over at the source to
visible at the destination) and throughput are that command's own summary,
and the table prints the command. With --workers inproc,process every row is
run twice, its workers in this process and as worker processes, for the
price of the process boundary in one table. Writes latency.json into --out and prints
the table as Markdown. Exit status 1 when a run failed.`,
		Example: `  rewind bench latency
  rewind bench latency --duration 10s --out rewind-bench/latency
  rewind bench latency --workers inproc,process`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration < 100*time.Millisecond || duration > time.Hour {
				return usagef("invalid --duration %s: between 100ms and 1h", duration)
			}
			if out == "" {
				return usagef("invalid --out: must name a directory")
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			modes, err := parseWorkerModes(workers)
			if err != nil {
				return err
			}
			var cases []bench.LatencyCase
			for _, m := range modes {
				for _, e := range registry {
					cases = append(cases, latencyCases(e, duration, m)...)
				}
			}
			scratch, err := os.MkdirTemp("", "rewind-latency-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(scratch)
			p := bench.LatencyPlan{Cases: cases, Child: bench.Child{Binary: exe}, Scratch: scratch,
				Command:  replayCommandOf(cmd.Flags(), "rewind bench latency"),
				Progress: func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }}
			res, err := bench.RunLatency(cmd.Context(), p)
			if err != nil {
				return err
			}
			failed := ""
			for _, row := range res.Rows {
				if row.Error != "" {
					failed = "at least one run failed (see the table)"
				}
			}
			return reportBench(res, "latency", out, stdout, stderr, failed)
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&duration, "duration", 4*time.Second, "input of each run, as time at its rate")
	fl.StringVar(&out, "out", "rewind-bench/latency", "directory for latency.json")
	fl.StringVar(&workers, "workers", "inproc", "where the rows' workers run: inproc, process (real worker processes), or inproc,process for both side by side")
	return cmd
}
