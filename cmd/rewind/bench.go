package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
)

type benchFlags struct {
	runFlags
	contestants      string
	out              string
	scratch          string
	keep             bool
	duration, warmup time.Duration
	rate             float64
	repeat           int
	sweep            string
}

// benchCadenceFlags are the executors' own cadence flags, which bench
// refuses: it gives every contestant one cadence, --checkpoint-interval.
var benchCadenceFlags = []string{"trigger", "job-interval", "job-records"}

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &benchFlags{runFlags: runFlags{barriers: "aligned", output: "-"}}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run one live scenario under every executor with the same crash and compare the costs",
		Long: fmt.Sprintf(`bench feeds every contestant the same live input, generated at --rate
records/s for --duration and paced by the wall clock (it keeps arriving
while a contestant is down), and gives each the same cadence: the time
between recovery points (recordwise's checkpoint interval, microbatch's
trigger, diskphase's finite-job interval) is --checkpoint-interval for all.

Unless --fail says otherwise, worker 0 is killed at warmup + %g x cadence
(3.5s by default), so at least two recovery points have completed after
the warmup. --repeat N runs every contestant N times, interleaved (A B C D
A B C D ...); repeat r moves every timed kill later by a seeded offset
within one cadence, the same for every contestant, so the repeats sample
the whole cycle (the seed is --seed; the progress shows the command that
replays the benchmark). Detection and replacement are modelled delays
(--detect-delay, --acquire-delay), identical for every contestant and
labelled modelled in the bill. With --workers process they are measured
instead: each contestant that can runs its workers as processes of this
binary (the others are left out, with a note, unless --executors names
them, which is refused), a kill is a SIGKILL, and the bill labels detect
and acquire measured.

Steady-state figures (throughput, latency p50/p99/max, median checkpoint
duration) come from the window between the end of --warmup and the fault;
the bill (detect, acquire, restore, reprocess, catch-up, time to recovered)
from the run's recoveries. Every resolved output is checked against the
reference executor's over the same input. Results go to --out; the exit
status is 1 when a run failed or produced a wrong result.`, bench.DefaultFaultCadences),
		Example: `  rewind bench                                      # keyed-count, every executor, one crash
  rewind bench --workers process --repeat 3 --out rewind-bench  # what make bench runs
  rewind bench --executors recordwise/aligned,recordwise/unaligned --fail worker=1,at=5s
  rewind bench --rate 100000 --duration 20s --checkpoint-interval 2s
  rewind bench --fail none --summary json            # steady state only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.bench(cmd, stdout, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.contestants, "executors", bench.DefaultContestants(registry), "contestants, comma-separated; recordwise takes /aligned or /unaligned")
	fl.StringArrayVar(&f.fails, "fail", nil, fmt.Sprintf("crash for every run: worker=W,at=DURATION, worker=W,after-records=N or worker=W,at-point=NAME[,occurrence=K] (each [,after-point=NAME]; repeatable), or none for the steady state only (default: worker 0 at warmup + %g x cadence)", bench.DefaultFaultCadences))
	fl.DurationVar(&f.duration, "duration", bench.DefaultDuration, "how long the live input runs")
	fl.Float64Var(&f.rate, "rate", bench.DefaultRate, "records/s of the live input (summed over the job's inputs)")
	fl.DurationVar(&f.warmup, "warmup", bench.DefaultWarmup, "start of the run left out of the figures")
	fl.IntVar(&f.repeat, "repeat", 1, "runs of every contestant, interleaved, each with the fault moved by a seeded offset within one cadence")
	addSweepFlag(fl, &f.sweep)
	fl.StringVar(&f.out, "out", "rewind-bench", "directory for results.json and the other result files")
	fl.StringVar(&f.scratch, "scratch", "", "directory for outputs and local storage (default: a temporary one, removed afterwards)")
	fl.BoolVar(&f.keep, "keep", false, "keep the scratch directory (outputs and storage of every run)")
	fl.StringVar(&f.summary, "summary", "text", "result format on stdout: text (a table), json (results.json as the last line)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log executor details to stderr")
	f.addJobFlags(fl)
	// In bench the cadence is everyone's, and the modelled delays are on.
	f.checkpointInterval, f.detectDelay, f.acquireDelay = bench.DefaultCadence, bench.DefaultDetectDelay, bench.DefaultAcquireDelay
	for name, def := range map[string]string{"checkpoint-interval": bench.DefaultCadence.String(),
		"detect-delay": bench.DefaultDetectDelay.String(), "acquire-delay": bench.DefaultAcquireDelay.String()} {
		fl.Lookup(name).DefValue = def
	}
	fl.Lookup("checkpoint-interval").Usage = "the cadence of every contestant: recordwise's checkpoint interval, microbatch's trigger, diskphase's finite-job interval"
	fl.Lookup("detect-delay").Usage = "modelled heartbeat timeout, the same for every contestant"
	fl.Lookup("acquire-delay").Usage = "modelled time to obtain a replacement worker, the same for every contestant"
	for _, name := range benchCadenceFlags {
		fl.Lookup(name).Hidden = true
	}
	return cmd
}

func (f *benchFlags) bench(cmd *cobra.Command, stdout, stderr io.Writer) error {
	fl := cmd.Flags()
	for _, name := range benchCadenceFlags {
		if fl.Changed(name) {
			return usagef("invalid --%s: bench gives every contestant the same cadence; use --checkpoint-interval", name)
		}
	}
	switch {
	case f.duration <= 0:
		return usagef("invalid --duration %s: must be positive", f.duration)
	case f.warmup < 0 || f.warmup >= f.duration:
		return usagef("invalid --warmup %s: must be at least 0 and shorter than --duration %s", f.warmup, f.duration)
	case f.rate < 1:
		return usagef("invalid --rate %g: must be at least 1 record/s", f.rate)
	case f.repeat < 1:
		return usagef("invalid --repeat %d: must be at least 1", f.repeat)
	case f.out == "":
		return usagef("invalid --out: must name a directory")
	}
	cfg, _, err := f.config(nil)
	if err != nil {
		return err
	}
	if err := f.workerSettings(fl, &cfg); err != nil {
		return err
	}
	if cfg.Workers == run.WorkersProcess {
		// A worker process's death is detected and its replacement
		// started for real: model neither unless asked to.
		if !fl.Changed("detect-delay") {
			cfg.DetectDelay = 0
		}
		if !fl.Changed("acquire-delay") {
			cfg.AcquireDelay = 0
		}
	}
	contestants, err := bench.ParseContestants(f.contestants, registry)
	if err != nil {
		return usageError{err}
	}
	if contestants, err = processContestants(cfg, contestants, fl.Changed("executors"), stderr); err != nil {
		return err
	}
	var names []string
	for _, c := range contestants {
		if !slices.Contains(names, c.Executor) {
			names = append(names, c.Executor)
		}
	}
	if err := checkExecutorFlagsExcept(fl, []string{"checkpoint-interval"}, names...); err != nil {
		return err
	}
	faults := bench.Faults{None: f.noFails, Specs: cfg.Fails}
	for _, s := range faults.Specs {
		if !s.IsWorkerKill() {
			return usagef("invalid --fail %s: bench gives every executor the same crash, and named points differ between executors; use worker=W,at=DURATION or worker=W,after-records=N[,after-point=NAME]", s)
		}
		if s.At > 0 && s.At+f.checkpointInterval > f.duration {
			return usagef("invalid --fail %s: shifted by up to one cadence (%s) it could come after the input ends (--duration %s)", s, f.checkpointInterval, f.duration)
		}
	}
	for _, c := range contestants {
		exec := executors[c.Executor]
		if err := fault.Validate(faults.Specs, exec.FailPoints(), exec.Workers(cfg)); err != nil {
			return usageError{fmt.Errorf("%s: %w", c.Name(), err)}
		}
	}
	killed := []int{0} // the default fault's worker
	if len(faults.Specs) > 0 || faults.None {
		killed = nil
	}
	for _, s := range faults.Specs {
		killed = append(killed, s.Worker)
	}
	sw, err := parseSweepFlag(f.sweep, killed)
	if err != nil {
		return err
	}
	if !faults.None && len(faults.Specs) == 0 {
		longest := f.checkpointInterval
		for _, pt := range sw.points {
			longest = max(longest, pt.Cadence)
		}
		if at := bench.DefaultFault(f.warmup, longest).At; at+longest > f.duration {
			return usagef("invalid --duration %s: the default fault comes at warmup + %g × cadence (%s at a %s cadence) and may move one cadence later, after the input ends; give at least --duration %s",
				f.duration, bench.DefaultFaultCadences, at, longest, at+longest)
		}
	}
	var inputs func(float64, int) map[string]string
	if len(f.inputs) > 0 {
		given := cfg.Inputs
		inputs = func(float64, int) map[string]string { return given }
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
	if fl.Changed("storage") {
		storage = cfg.Storage
	}
	level := slog.LevelError
	if f.verbose {
		level = slog.LevelInfo
	}
	plan := bench.Plan{
		Config: cfg, Contestants: contestants, Faults: faults, Inputs: inputs,
		Duration: f.duration, Warmup: f.warmup, Cadence: f.checkpointInterval, Rate: f.rate,
		Repeat: f.repeat, Seed: f.seed, Command: replayCommand(fl), Storage: storage, Scratch: scratch,
		Executors: executors, Options: f.allOptions(), Alloc: memory.NewGoAllocator(),
		Log:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Progress: stderr,
		Sweep:    sw.name, Points: sw.points,
		WorkerCommand: f.workerCommand(cfg),
	}
	if sw.name == bench.SweepLoad {
		if plan.Calibration, err = calibrate(cmd.Context(), plan, contestants); err != nil {
			return err
		}
		plan.Capacity = bench.Capacities(plan.Calibration)
	}
	res, err := bench.Run(cmd.Context(), plan)
	if err != nil {
		return err
	}
	if f.keep || f.scratch != "" {
		fmt.Fprintf(stderr, "bench: outputs and storage of every run are in %s\n", scratch)
	}
	files, err := res.WriteDir(f.out)
	if err != nil {
		return fmt.Errorf("writing the results into %s: %w", f.out, err)
	}
	fmt.Fprintf(stderr, "bench: wrote %s\n", strings.Join(files, ", "))
	if f.summary == "json" {
		err = writeJSONLine(stdout, res)
	} else {
		err = res.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if res.Failed() {
		return fmt.Errorf("at least one run failed or differed from the reference (see the progress above)")
	}
	return nil
}

// replayCommand is the command line that runs this benchmark again: the
// flags set, and the seed, which fixes the inputs and the fault moments.
func replayCommand(fl *pflag.FlagSet) string { return replayCommandOf(fl, "rewind bench") }

// replayCommandOf is replayCommand for the command named by prefix.
func replayCommandOf(fl *pflag.FlagSet, prefix string) string {
	parts := []string{prefix}
	fl.Visit(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok && f.Value.Type() == "stringArray" {
			for _, v := range sv.GetSlice() {
				parts = append(parts, "--"+f.Name+"="+shellQuote(v))
			}
			return
		}
		parts = append(parts, "--"+f.Name+"="+shellQuote(f.Value.String()))
	})
	if seed := fl.Lookup("seed"); seed != nil && !fl.Changed("seed") {
		parts = append(parts, "--seed="+seed.Value.String())
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>*?()[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// processContestants are the contestants that can run with cfg's
// --workers. With process, a contestant whose executor's workers cannot be
// processes is refused when the user listed it, and left out with a note
// when it came from the default list (so `rewind bench --workers process`
// runs what can run). In process mode the bill's detect and acquire are
// measured, so the modelled delays are off unless given.
func processContestants(cfg run.Config, cs []bench.Contestant, listed bool, stderr io.Writer) ([]bench.Contestant, error) {
	if cfg.Workers != run.WorkersProcess {
		return cs, nil
	}
	var keep []bench.Contestant
	var left []string
	for _, c := range cs {
		if executors[c.Executor].Traits().ProcessWorkers {
			keep = append(keep, c)
			continue
		}
		if listed {
			return nil, usagef("invalid --workers process: contestant %s runs its workers inside this process only; leave it out of --executors or use --workers inproc", c.Name())
		}
		left = append(left, c.Name())
	}
	if len(keep) == 0 {
		return nil, usagef("invalid --workers process: no contestant runs its workers as processes")
	}
	if len(left) > 0 {
		fmt.Fprintf(stderr, "bench: --workers process: left out %s (their workers run inside this process only)\n", strings.Join(left, ", "))
	}
	return keep, nil
}
