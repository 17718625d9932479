package main

import (
	"strings"
	"testing"
)

// A flag of another executor is refused, exit 2, naming the executor it
// belongs to; before, it was accepted and ignored.
func TestAnotherExecutorsFlagIsAUsageError(t *testing.T) {
	cases := []struct {
		args   []string
		phrase string
	}{
		{[]string{"run", "--executor", "microbatch", "--barriers", "unaligned"}, "invalid --barriers: it applies to recordwise only, not to --executor microbatch"},
		{[]string{"run", "--executor", "diskphase", "--checkpoint-interval", "1s"}, "invalid --checkpoint-interval: it applies to recordwise only, not to --executor diskphase"},
		{[]string{"run", "--executor", "recordwise", "--trigger", "1s"}, "invalid --trigger: it applies to microbatch only, not to --executor recordwise"},
		{[]string{"run", "--executor", "recordwise", "--job-records", "10"}, "invalid --job-records: it applies to diskphase only"},
		{[]string{"run", "--executor", "recordwise", "--lost-piece-recovery", "rerun-batch"}, "applies to diskphase and microbatch only"},
		{[]string{"run", "--executor", "reference", "--retained-batches", "3"}, "invalid --retained-batches: it applies to microbatch only, not to --executor reference"},
		{[]string{"run", "--executor", "reference", "--detect-delay", "1s"}, "invalid --detect-delay: it applies to diskphase and microbatch and recordwise only, not to --executor reference"},
		{[]string{"run", "--executor", "reference", "--acquire-delay", "1s"}, "invalid --acquire-delay: it applies to diskphase and microbatch and recordwise only"},
		{[]string{"trace", "--executor", "microbatch", "--barriers", "aligned"}, "invalid --barriers: it applies to recordwise only, not to --executor microbatch"},
		{[]string{"trace", "--executor", "diskphase", "--trigger", "5ms"}, "invalid --trigger: it applies to microbatch only"},
		{[]string{"bench", "--executors", "microbatch,diskphase", "--alignment-timeout", "5ms"}, "invalid --alignment-timeout: it applies to recordwise only, not to any of --executors microbatch,diskphase"},
		{[]string{"bench", "--executors", "microbatch,diskphase", "--trigger", "5ms"}, "invalid --trigger: bench gives every contestant the same cadence; use --checkpoint-interval"},
		{[]string{"bench", "--executors", "diskphase", "--job-records", "50"}, "invalid --job-records: bench gives every contestant the same cadence"},
	}
	for _, c := range cases {
		code, stdout, stderr := rewind(t, c.args...)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.phrase) {
			t.Errorf("rewind %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", strings.Join(c.args, " "), code, stdout, stderr, c.phrase)
		}
	}
	// A flag that belongs to the executor, or to one contestant, is taken.
	for _, args := range [][]string{
		{"run", "--executor", "microbatch", "--trigger", "5ms", "--list-fail-points"},
		{"run", "--executor", "diskphase", "--lost-piece-recovery", "rerun-batch", "--list-fail-points"},
		{"run", "--executor", "microbatch", "--detect-delay", "1s", "--acquire-delay", "2s", "--list-fail-points"},
		{"run", "--barriers", "unaligned", "--checkpoint-interval", "2s", "--list-fail-points"},
	} {
		if code, _, stderr := rewind(t, args...); code != 0 {
			t.Errorf("rewind %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
	}
}
