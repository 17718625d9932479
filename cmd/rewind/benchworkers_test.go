package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/bench"
)

// The heartbeat flags are validated, refused where they do nothing
// (--workers inproc, the default), and --workers process is refused by
// trace and by a bench contestant listed without the trait: each a usage
// error (exit 2) that says why.
func TestWorkerFlagsAreValidatedAndRefused(t *testing.T) {
	dir := t.TempDir()
	out := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--executor", "diskphase", "--heartbeat-interval", "50ms"}, "invalid --heartbeat-interval: it does nothing with --workers inproc"},
		{[]string{"run", "--executor", "diskphase", "--workers", "inproc", "--heartbeat-timeout", "1s"}, "invalid --heartbeat-timeout: it does nothing with --workers inproc"},
		{[]string{"run", "--executor", "diskphase", "--workers", "process", "--heartbeat-interval", "0s"}, "invalid --heartbeat-interval 0s: must be positive"},
		{[]string{"run", "--executor", "diskphase", "--workers", "process", "--heartbeat-interval", "-1s"}, "invalid --heartbeat-interval -1s: must be positive"},
		{[]string{"run", "--executor", "diskphase", "--workers", "process", "--heartbeat-timeout", "100ms"}, "invalid --heartbeat-timeout 100ms: must be longer than --heartbeat-interval 100ms"},
		{[]string{"run", "--executor", "diskphase", "--workers", "process", "--heartbeat-interval", "2s", "--heartbeat-timeout", "1s"}, "must be longer than --heartbeat-interval 2s"},
		{[]string{"bench", "--heartbeat-timeout", "1s"}, "invalid --heartbeat-timeout: it does nothing with --workers inproc"},
		{[]string{"bench", "--workers", "process", "--heartbeat-interval", "1s", "--heartbeat-timeout", "1s"}, "must be longer than --heartbeat-interval"},
		{[]string{"bench", "--workers", "threads"}, `invalid --workers "threads"`},
		{[]string{"run", "--executor", "microbatch", "--workers", "process", "--lost-piece-recovery", "lineage"}, "--lost-piece-recovery lineage: with --workers process microbatch recovers by rerun-batch only"},
		{[]string{"trace", "--teach", "list", "--workers", "process"}, "invalid --workers process with --teach: a lesson's mistake runs inside the workers"},
		{[]string{"trace", "--heartbeat-interval", "10ms"}, "invalid --heartbeat-interval: it does nothing with --workers inproc"},
	} {
		var args []string
		switch c.args[0] {
		case "run":
			args = append(c.args, "--output", out("o"), "--storage", out("s"), "--input", "gen:records=10")
		case "bench":
			args = append(c.args, "--out", out("b"), "--storage", out("s"))
		default:
			args = c.args
		}
		code, _, stderr := rewind(t, args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	// Valid settings are taken, and not refused by the check above.
	code, _, stderr := rewind(t, "run", "--executor", "reference", "--workers", "inproc", "--output", out("ok"), "--input", "gen:records=10")
	if code != 0 {
		t.Fatalf("a valid inproc run: exit %d, stderr %q", code, stderr)
	}
}

// TestBenchWithWorkerProcessesMeasuresTheBill: `rewind bench --workers
// process` without --executors runs all four default contestants with
// their workers as processes of the binary (none is left out: every
// executor can). The default kill SIGKILLs one in each, so
// the results carry a measured detect and acquire (> 0, labelled
// measured, nothing modelled), the table marks them, the output equals
// the reference's, and no worker process outlives the benchmark.
func TestBenchWithWorkerProcessesMeasuresTheBill(t *testing.T) {
	dir := t.TempDir()
	p := startCLI(t, dir, "bench", "--workers", "process", "--duration", "3s", "--warmup", "500ms",
		"--checkpoint-interval", "500ms", "--rate", "20000", "--out", "res", "--summary", "text", "-v")
	p.wait(t, 2*time.Minute)
	logs := p.stderr.String()
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s\nstdout:\n%s", p.state, logs, p.stdout.String())
	}
	if strings.Contains(logs, "bench: --workers process: left out ") {
		t.Errorf("a contestant was left out:\n%s", logs)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "res", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Results
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	if res.Scenario.Workers != "process" || res.Scenario.DetectDelayMs != 0 || res.Scenario.AcquireDelayMs != 0 {
		t.Errorf("scenario: workers %q, modelled delays %v/%v ms; want process and none", res.Scenario.Workers,
			res.Scenario.DetectDelayMs, res.Scenario.AcquireDelayMs)
	}
	ran := 0
	for _, r := range res.Runs {
		if !executors[strings.Split(r.Contestant, "/")[0]].Traits().ProcessWorkers {
			t.Errorf("contestant %s ran, but its workers cannot be processes", r.Contestant)
			continue
		}
		ran++
		f := r.Figures
		if !r.Correct || r.Error != "" {
			t.Errorf("%s: correct %v, error %q", r.Contestant, r.Correct, r.Error)
		}
		if f.DetectMs == nil || *f.DetectMs <= 0 || f.AcquireMs == nil || *f.AcquireMs <= 0 {
			t.Errorf("%s: detect %v acquire %v ms; want both measured, > 0", r.Contestant, f.DetectMs, f.AcquireMs)
		}
		if !slices.Equal(f.Measured, []string{"detect", "acquire"}) || len(f.Modelled) != 0 {
			t.Errorf("%s: measured %v, modelled %v; want detect and acquire measured, nothing modelled", r.Contestant, f.Measured, f.Modelled)
		}
	}
	if want := len(strings.Split(bench.DefaultContestants(registry), ",")); ran != want {
		t.Fatalf("%d contestants ran with worker processes, want all %d:\n%s", ran, want, logs)
	}
	table := p.stdout.String()
	if !strings.Contains(table, "detect+") || !strings.Contains(table, "acquire+") || !strings.Contains(table, "+ measured on worker processes") {
		t.Errorf("the table does not mark detect and acquire as measured:\n%s", table)
	}
	checkWorkersGone(t, logs, 3*ran) // two each, and the killed one's replacement
}

// TestHeartbeatFlagsReachTheWorkersAndTheCoordinator: with
// --heartbeat-interval 40ms --heartbeat-timeout 600ms the worker processes
// are started beating every 40 ms (their command line says so), and a
// worker frozen by SIGSTOP is declared dead after 600 ms of silence, not
// the default 5 s: the run ends with the frozen worker replaced.
func TestHeartbeatFlagsReachTheWorkersAndTheCoordinator(t *testing.T) {
	dir := t.TempDir()
	p := startCLI(t, dir, "run", "--executor", "diskphase", "--workers", "process", "--heartbeat-interval", "40ms",
		"--heartbeat-timeout", "600ms", "--job", "keyed-count", "--input", "gen:records=40000,keys=100,partitions=2,rate=10000,seed=3",
		"--job-records", "5000", "--sink-mode", "idempotent", "--output", "out", "--storage", "data",
		"--summary", "json", "--progress", "none", "-v")
	var frozen int
	deadline := time.Now().Add(time.Minute)
	for frozen == 0 && time.Now().Before(deadline) && p.running() {
		for _, m := range workerStarted.FindAllStringSubmatch(p.stderr.String(), -1) {
			if m[1] == "1" {
				frozen, _ = strconv.Atoi(m[3])
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if frozen == 0 {
		p.wait(t, time.Minute)
		t.Fatalf("worker 1 never started; stderr:\n%s", p.stderr)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", frozen))
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Split(string(cmdline), "\x00"); !slices.Contains(args, "--heartbeat-interval") || !slices.Contains(args, "40ms") {
		t.Errorf("worker 1's command line %q does not carry --heartbeat-interval 40ms", args)
	}
	// Freeze it only once it is ready: frozen while joining, it would fail
	// the run's start instead of being declared dead and replaced.
	for !strings.Contains(p.stderr.String(), "worker 1 joined from") {
		if time.Now().After(deadline) || !p.running() {
			p.wait(t, time.Minute)
			t.Fatalf("worker 1 never became ready; stderr:\n%s", p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(frozen, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 2*time.Minute)
	logs := p.stderr.String()
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s", p.state, logs)
	}
	if !strings.Contains(logs, "silent past the heartbeat timeout") || !strings.Contains(logs, "(timeout 600ms)") {
		t.Fatalf("the frozen worker was not declared dead by the 600ms timeout:\n%s", logs)
	}
	checkWorkersGone(t, logs, 3)
}

// checkWorkersGone checks that at least want worker processes were
// started (by the -v log) and that none of them is still alive.
func checkWorkersGone(t *testing.T, logs string, want int) {
	t.Helper()
	started := workerStarted.FindAllStringSubmatch(logs, -1)
	if len(started) < want {
		t.Fatalf("%d worker processes started, want at least %d:\n%s", len(started), want, logs)
	}
	for _, m := range started {
		pid, _ := strconv.Atoi(m[3])
		// A stopped or zombie process still has its directory; a reaped
		// one does not.
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("worker %s (pid %d) outlived its run", m[1], pid)
		}
	}
}
