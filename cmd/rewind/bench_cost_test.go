package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchCostThroughTheCLI: a small COST run writes its files and a
// table with the reference's row and each contestant's ratio.
func TestBenchCostThroughTheCLI(t *testing.T) {
	out := filepath.Join(t.TempDir(), "cost")
	code, stdout, stderr := rewind(t, "bench", "cost", "--jobs", "keyed-count", "--records", "20000",
		"--executors", defaultExecutor, "--parallelism", "1,2", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"cost.json", "cost.csv", "cost.svg", "cost.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
	var rows int
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "keyed-count ") {
			rows++
		}
	}
	if rows != 3 || !strings.Contains(stdout, "replay: rewind bench cost ") {
		t.Errorf("want the reference's row and two of %s, and the replay line:\n%s", defaultExecutor, stdout)
	}
}

// TestBenchCostRefusesBadFlags: each with exit 2 and one line naming the
// flag.
func TestBenchCostRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "nope"},
		{"--parallelism", "0"},
		{"--parallelism", "1,x"},
		{"--records", "10"},
		{"--repeat", "0"},
		{"--executors", "nope"},
		{"--barriers", "aligned"}, // run's flag, not cost's
	} {
		code, _, stderr := rewind(t, append([]string{"bench", "cost"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 1 || !strings.Contains(stderr, strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a line naming the flag", args, code, stderr)
		}
	}
}
