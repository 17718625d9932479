package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/bench"
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

// TestBenchCostSetsWorkerProcessesAgainstInproc: with --workers
// inproc,process every default contestant runs twice, the second time on
// real worker processes, each result checked against the reference, and
// the process row carries its throughput over the inproc row's.
func TestBenchCostSetsWorkerProcessesAgainstInproc(t *testing.T) {
	dir := t.TempDir()
	p := startCLI(t, dir, "bench", "cost", "--jobs", "keyed-count", "--records", "20000", "--parallelism", "2",
		"--workers", "inproc,process", "--out", "cost", "-v")
	p.wait(t, 2*time.Minute)
	if !p.state.Success() {
		t.Fatalf("exit %s; stdout:\n%s\nstderr:\n%s", p.state, p.stdout.String(), p.stderr.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "cost", "cost.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.CostResults
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	inproc, processes := map[string]bool{}, map[string]float64{}
	for _, row := range res.Rows {
		if row.Error != "" || row.Wrong > 0 {
			t.Errorf("%s (%s): error %q, %d wrong", row.Contestant, row.Workers, row.Error, row.Wrong)
		}
		switch {
		case row.Reference:
		case row.Workers == "":
			inproc[row.Contestant] = true
		case row.Workers == "process":
			processes[row.Contestant] = row.VsInproc
		}
	}
	if len(inproc) == 0 || len(processes) != len(inproc) {
		t.Fatalf("inproc rows %v, process rows %v: want every contestant in both", inproc, processes)
	}
	for c, ratio := range processes {
		if !inproc[c] || !(ratio > 0) {
			t.Errorf("%s with worker processes: × inproc %v, want a ratio to its inproc row", c, ratio)
		}
	}
	if started := workerStarted.FindAllString(p.stderr.String(), -1); len(started) < 2*len(processes) {
		t.Errorf("%d worker processes started for %d contestants: the process rows did not run on processes", len(started), len(processes))
	}
	if !strings.Contains(p.stdout.String(), "(worker processes)") || !strings.Contains(p.stdout.String(), "× inproc") {
		t.Errorf("the table does not show the process rows against inproc:\n%s", p.stdout.String())
	}
}
