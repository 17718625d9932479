package main

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/diskphase"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
)

// executors maps --executor values to implementations. The CLI is the only
// place that knows every executor; executors never import each other.
var executors = map[string]run.Executor{
	"reference":  oracle.Executor{},
	"microbatch": microbatch.Executor{},
	"diskphase":  diskphase.Executor{},
	"recordwise": recordwise.Executor{},
}

// executorFlags says which flags belong to which executor: a flag in the
// table that is set on the command line must belong to the executor the
// run uses (to one of bench's contestants), or the command refuses it
// (checkExecutorFlags) instead of ignoring it. Flags not in the table
// (the job, its inputs, output, storage, parallelism) apply to all.
var executorFlags = map[string][]string{
	"microbatch": {"trigger", "max-batch-records", "retained-batches", "lost-piece-recovery"},
	"diskphase":  {"job-records", "job-interval", "lost-piece-recovery"},
	"recordwise": {"barriers", "alignment-timeout", "checkpoint-interval", "buffer-timeout", "checkpoint-timeout",
		"retained-checkpoints", "detect-delay"},
}

// checkExecutorFlags refuses a flag set in fl that belongs to none of the
// executors named (the run's, or bench's contestants), naming the
// executors it does belong to.
func checkExecutorFlags(fl *pflag.FlagSet, names ...string) error {
	owners := map[string][]string{}
	for exec, flags := range executorFlags {
		for _, flag := range flags {
			owners[flag] = append(owners[flag], exec)
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
