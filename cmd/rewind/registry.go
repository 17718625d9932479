package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/diskphase"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
	"github.com/rewind-engine/rewind/reference"
)

// registry is every executor, in the order help texts list them. The CLI
// is the only place that knows every executor by name and builds each
// one's Options; everything else asks an executor's run.Traits.
// Executors never import each other.
var registry = []run.Executor{reference.Executor{}, microbatch.Executor{}, diskphase.Executor{}, recordwise.Executor{}}

// defaultExecutor is the --executor of run and trace when none is given.
const defaultExecutor = "recordwise"

// executors maps --executor values to implementations.
var executors = func() map[string]run.Executor {
	m := map[string]run.Executor{}
	for _, e := range registry {
		m[e.Name()] = e
	}
	return m
}()

// options are the Options of exec that the flags set (nil for an executor
// with none). The flags are validated by runFlags.config.
func (f *runFlags) options(exec run.Executor) run.Options {
	switch exec.(type) {
	case microbatch.Executor:
		return microbatch.Options{Trigger: f.trigger, MaxBatchRecords: f.maxBatchRecords,
			RetainedBatches: f.retainedBatches, LostPieceRecovery: f.lostPieceRecovery}
	case diskphase.Executor:
		return diskphase.Options{JobRecords: f.jobRecords, JobInterval: f.jobInterval, LostPieceRecovery: f.lostPieceRecovery}
	case recordwise.Executor:
		return recordwise.Options{Barriers: f.barriers, AlignmentTimeout: f.alignmentTimeout,
			CheckpointInterval: f.checkpointInterval, BufferTimeout: f.bufferTimeout, CheckpointTimeout: f.cpTimeout,
			RetainedCheckpoints: f.retainedCPs}
	}
	return nil
}

// latencyCases are the runs `rewind bench latency` measures: each
// executor at the setting its latency target was set for (issues #3, #4
// and #16), keyed-count over 100 k keys in 2 partitions at parallelism
// 2, every sink mode, each input as long as duration at its rate, with
// its workers where workers says; diskphase, which has no latency target,
// at a finite job per 100 ms of input. The reference has none, nor an
// executor whose workers cannot be processes in process mode.
func latencyCases(exec run.Executor, duration time.Duration, workers run.WorkerMode) []bench.LatencyCase {
	var name string
	var args []string
	var rate, p99 float64
	switch exec.(type) {
	case microbatch.Executor:
		name, rate, p99 = "microbatch --trigger 10ms", 1_000_000, 30
		args = []string{"--executor", "microbatch", "--trigger", "10ms"}
	case recordwise.Executor:
		name, rate, p99 = "recordwise aligned, 1 s checkpoints, --buffer-timeout 1ms", 100_000, 5
		args = []string{"--executor", "recordwise", "--barriers", "aligned", "--checkpoint-interval", "1s", "--buffer-timeout", "1ms"}
	case diskphase.Executor:
		// No latency target: a row waits for the rest of its job's
		// interval, then for the job. Measured to set it beside the
		// others, inproc and on worker processes.
		name, rate = "diskphase, a finite job per 100 ms of input", 100_000
		args = []string{"--executor", "diskphase", "--job-interval", "100ms"}
	default:
		return nil
	}
	if workers == run.WorkersProcess {
		if !exec.Traits().ProcessWorkers {
			return nil
		}
		name += ", worker processes"
		args = append(slices.Clone(args), "--workers", "process")
	}
	records := int64(rate * duration.Seconds())
	args = append(args, "--job", "keyed-count", "--parallelism", "2",
		"--input", fmt.Sprintf("gen:records=%d,keys=100000,partitions=2,rate=%.0f", records, rate))
	var out []bench.LatencyCase
	for _, mode := range []string{"append", "transactional", "idempotent"} {
		c := bench.LatencyCase{Name: name, SinkMode: mode, Args: args, Rate: rate, Workers: string(workers),
			TargetP99Ms: p99, Target: fmt.Sprintf("p99 ≤ %g ms", p99)}
		if p99 == 0 {
			c.Target = "none: bounded by the job interval (100 ms) plus a job's duration"
		}
		if _, ok := exec.(recordwise.Executor); ok && mode == "transactional" {
			// Rows are published when the checkpoint covering them
			// completes: up to an interval plus that checkpoint's time.
			c.TargetP99Ms, c.Target = 0, "bounded by the checkpoint interval (1 s) plus a checkpoint's duration"
		}
		out = append(out, c)
	}
	return out
}

// allOptions are every executor's options as the flags set them.
func (f *runFlags) allOptions() map[string]run.Options {
	out := map[string]run.Options{}
	for _, e := range registry {
		if o := f.options(e); o != nil {
			out[e.Name()] = o
		}
	}
	return out
}

// executorFlags says which flags belong to which executor, as each
// declares them (run.Traits.Flags): a flag in the table that is set on the
// command line must belong to the executor the run uses (to one of bench's
// contestants), or the command refuses it (checkExecutorFlags) instead of
// ignoring it. Flags not in the table (the job, its inputs, output,
// storage, parallelism) apply to all.
func executorFlags() map[string][]string {
	out := map[string][]string{}
	for _, e := range registry {
		if flags := e.Traits().Flags; len(flags) > 0 {
			out[e.Name()] = flags
		}
	}
	return out
}

// checkExecutorFlags refuses a flag set in fl that belongs to none of the
// executors named (the run's, or bench's contestants), naming the
// executors it does belong to.
func checkExecutorFlags(fl *pflag.FlagSet, names ...string) error {
	return checkExecutorFlagsExcept(fl, nil, names...)
}

// checkExecutorFlagsExcept is checkExecutorFlags for a command that gives
// the flags in except to every executor (bench's --checkpoint-interval).
func checkExecutorFlagsExcept(fl *pflag.FlagSet, except []string, names ...string) error {
	owners := map[string][]string{}
	for exec, flags := range executorFlags() {
		for _, flag := range flags {
			if !slices.Contains(except, flag) {
				owners[flag] = append(owners[flag], exec)
			}
		}
	}
	for _, flag := range slices.Sorted(maps.Keys(owners)) {
		if !fl.Changed(flag) || slices.ContainsFunc(owners[flag], func(e string) bool { return slices.Contains(names, e) }) {
			continue
		}
		slices.Sort(owners[flag])
		what := "--executor " + names[0]
		if len(names) > 1 {
			what = "any of --executors " + strings.Join(names, ",")
		}
		return usagef("invalid --%s: it applies to %s only, not to %s; leave it out", flag, strings.Join(owners[flag], " and "), what)
	}
	return nil
}

func executorNames() []string {
	out := make([]string, 0, len(executors))
	for n := range executors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// recoveryExecutors are the executors that recover from crashes (all but
// the reference), in registry order.
func recoveryExecutors() []string {
	var out []string
	for _, e := range registry {
		if !e.Traits().Reference {
			out = append(out, e.Name())
		}
	}
	return out
}

// referenceExecutor is the failure-free oracle the others are checked
// against.
func referenceExecutor() run.Executor {
	i := slices.IndexFunc(registry, func(e run.Executor) bool { return e.Traits().Reference })
	return registry[i]
}
