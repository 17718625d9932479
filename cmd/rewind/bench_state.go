package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/bench"
)

// newBenchStateCmd is `rewind bench state`: issue #18's table of state at
// 100 k to 10 M keys through every executor.
func newBenchStateCmd(stdout, stderr io.Writer) *cobra.Command {
	var jobs, keys, contestants, out string
	var minRecords int64
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Recovery points, restore and peak memory of every executor as the number of keys grows",
		Long: `state runs every contestant on each stateful job at each key count, with
the executors' default settings, over a generated input that draws every
key (keys x (ln keys + 1) records in 2 partitions, at least --min-records),
unpaced, at parallelism 2, and kills worker 0 after three quarters of it.
windowed-sum gets windows of a quarter of the input's event time, so a
window holds nearly every key.

Each run is one 'rewind run ... --summary json' started as a child process
of this binary (its peak RSS is the child's getrusage maxrss). Then the
run's storage is read: its complete recovery points and the newest one's
size, and every object once, timed, for the storage's read bandwidth, set
beside the restore's (restore bytes over restore time). Writes state.json
into --out and prints the table as Markdown. Exit status 1 when a run
failed.`,
		Example: `  rewind bench state --keys 100000,1000000
  rewind bench state --jobs keyed-count --keys 10000000 --executors recordwise`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			js, err := parseJobs(jobs)
			if err != nil {
				return err
			}
			var ks []int64
			for _, s := range strings.Split(keys, ",") {
				k, err := strconv.ParseInt(s, 10, 64)
				if err != nil || k < 1000 || k > 100_000_000 {
					return usagef("invalid --keys %q: comma-separated numbers in 1000..100000000", s)
				}
				ks = append(ks, k)
			}
			if minRecords < 1000 {
				return usagef("invalid --min-records %d: at least 1000", minRecords)
			}
			if out == "" {
				return usagef("invalid --out: must name a directory")
			}
			cs, err := bench.ParseContestants(contestants, registry)
			if err != nil {
				return usageError{err}
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			var cases []bench.StateCase
			for _, j := range js {
				for _, k := range ks {
					records := bench.StateRecords(k, minRecords)
					for _, c := range cs {
						var variant []string
						if c.Variant != "" {
							variant = []string{"--" + executors[c.Executor].Traits().Variants.Flag, c.Variant}
						}
						cases = append(cases, bench.StateCase{Job: j, Keys: k, Records: records, Contestant: c.Name(),
							Executor: c.Executor, Args: bench.StateCaseArgs(j, c.Executor, variant, k, records)})
					}
				}
			}
			scratch, err := os.MkdirTemp("", "rewind-state-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(scratch)
			p := bench.StatePlan{Cases: cases, Child: bench.Child{Binary: exe}, Executors: executors, Scratch: scratch,
				Command:  replayCommandOf(cmd.Flags(), "rewind bench state"),
				Progress: func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }}
			res, err := bench.RunState(cmd.Context(), p)
			if err != nil {
				return err
			}
			failed := ""
			for _, row := range res.Rows {
				if row.Error != "" {
					failed = "at least one run failed (see the table)"
				}
			}
			return reportBench(res, "state", out, stdout, stderr, failed)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&jobs, "jobs", "keyed-count,windowed-sum", "stateful jobs, comma-separated")
	fl.StringVar(&keys, "keys", "100000,1000000,10000000", "key counts, comma-separated")
	fl.StringVar(&contestants, "executors", bench.DefaultContestants(registry), "contestants, comma-separated; recordwise takes /aligned or /unaligned")
	fl.Int64Var(&minRecords, "min-records", 4_000_000, "the shortest input, so small states still see recovery points before the crash")
	fl.StringVar(&out, "out", "rewind-bench/state", "directory for state.json")
	return cmd
}
