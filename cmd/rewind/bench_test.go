package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/reference"
)

// quickBench is a scenario of a couple of seconds: the default fault is
// at 300 ms + 2.5 × 300 ms = 1.05 s, shifted by up to 300 ms.
var quickBench = []string{"bench", "--duration", "2s", "--warmup", "300ms", "--checkpoint-interval", "300ms", "--rate", "20000"}

// One real short run of every default contestant through the CLI: each
// crashes once, recovers, matches the reference; results.json is written
// and the progress names each run with its fault moment.
func TestBenchRunsEveryDefaultContestantOnce(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	code, stdout, stderr := rewind(t, append(quickBench, "--out", out, "--summary", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res bench.Results
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
		t.Fatalf("the last line is not results.json: %v\n%s", err, stdout)
	}
	if strings.Join(res.Order, ",") != bench.DefaultContestants(registry) || len(res.Runs) != 4 {
		t.Fatalf("order %v, %d runs: want every default contestant once", res.Order, len(res.Runs))
	}
	for _, rr := range res.Runs {
		if !rr.Correct || rr.Error != "" || rr.Summary == nil || len(rr.Summary.Recoveries) != 1 || rr.FaultAtMs == nil {
			t.Errorf("%s: correct %v, error %q, fault %v: want one recovery and the reference's output", rr.Contestant, rr.Correct, rr.Error, rr.FaultAtMs)
			continue
		}
		if *rr.FaultAtMs < 1050 || *rr.FaultAtMs >= 1350 || rr.Figures.DetectMs == nil || *rr.Figures.DetectMs < 500 {
			t.Errorf("%s: fault at %v ms, detect %v: want [1050,1350) and the modelled 500 ms", rr.Contestant, *rr.FaultAtMs, rr.Figures.DetectMs)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
		t.Errorf("no results.json: %v", err)
	}
	if !strings.Contains(stderr, "[4/4] recordwise/unaligned repeat 1 fault at 1.") || !strings.Contains(stderr, "replay with: rewind bench") {
		t.Errorf("progress lacks the runs or the replay command:\n%s", stderr)
	}
}

// lossyExecutor is the reference under another name, but it drops the
// first record of every batch it reads: a broken contestant.
type lossyExecutor struct{}

func (lossyExecutor) Name() string               { return "lossy" }
func (lossyExecutor) Traits() run.Traits         { return run.Traits{} }
func (lossyExecutor) FailPoints() []string       { return nil }
func (lossyExecutor) Workers(cfg run.Config) int { return cfg.Parallelism }

func (lossyExecutor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	runtest.DropFirstRows(env.Sources)
	return reference.Executor{}.Run(ctx, env)
}

// A contestant that loses records makes rewind bench exit 1, and its run
// is marked wrong in the progress and the results.
func TestBenchExitsOneForABrokenContestant(t *testing.T) {
	saved := registry
	registry = append(append([]run.Executor(nil), registry...), lossyExecutor{})
	executors["lossy"] = lossyExecutor{}
	t.Cleanup(func() { registry = saved; delete(executors, "lossy") })

	out := filepath.Join(t.TempDir(), "res")
	code, stdout, stderr := rewind(t, "bench", "--executors", "lossy", "--duration", "500ms", "--warmup", "100ms",
		"--checkpoint-interval", "100ms", "--rate", "10000", "--fail", "none", "--out", out, "--summary", "json")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, stderr)
	}
	var res bench.Results
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || len(res.Runs) != 1 {
		t.Fatalf("results: %v (%s)", err, stdout)
	}
	if rr := res.Runs[0]; rr.Correct || rr.Diff == "" || !strings.Contains(stderr, "WRONG RESULT") {
		t.Fatalf("the lossy run: correct %v, diff %q; stderr:\n%s", rr.Correct, rr.Diff, stderr)
	}
}

func TestBenchRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--executors", "spark"},
		{"--executors", "reference"},
		{"--fail", "point=batch.mid-run"},
		{"--fail", "worker=5,at=2s"},
		{"--fail", "worker=0,at=9.5s"},
		{"--fail", "none", "--fail", "worker=0,at=2s"},
		{"--parallelism", "0"},
		{"--job", "nope"},
		{"--duration", "0s"},
		{"--warmup", "10s"},
		{"--rate", "0"},
		{"--repeat", "0"},
		{"--trigger", "5ms"},
		{"--sweep", "checkpoint-interval=1s,5s"}, // the default fault at 13.5 s: after 10 s of input
		{"--sweep", "load=150%"},
	} {
		code, _, stderr := rewind(t, append([]string{"bench"}, args...)...)
		if code != exitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("bench %v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
}
