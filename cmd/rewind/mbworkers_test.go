package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMicrobatchRunWithWorkerProcessesSIGKILLsOne: `rewind run --executor
// microbatch --workers process` (this test binary as rewind, its workers
// `rewind worker`) with worker 1 killed inside its second batch: the kill
// is a SIGKILL of a real process, the output equals an independent count
// with no duplicate, the bill's detect and acquire are measured, and no
// worker process outlives the run.
func TestMicrobatchRunWithWorkerProcessesSIGKILLsOne(t *testing.T) {
	dir := t.TempDir()
	const spec = "gen:records=60000,keys=500,partitions=2,seed=4"
	p := startCLI(t, dir, "run", "--executor", "microbatch", "--workers", "process", "--job", "keyed-count",
		"--input", spec, "--max-batch-records", "10000", "--sink-mode", "transactional", "--output", "out", "--storage", "data",
		"--fail", "point=batch.mid-run,worker=1,occurrence=2", "--summary", "json", "--progress", "none", "-v")
	checkOneSIGKILLedRun(t, p)
	checkKeyedCountOutput(t, filepath.Join(dir, "out"), spec)
}

// checkOneSIGKILLedRun waits for the run p with two worker processes and
// one kill: it succeeded with the kill's detect and acquire measured, a
// worker process died of SIGKILL, three were started (two, and the
// replacement), and none outlived the run.
func checkOneSIGKILLedRun(t *testing.T, p *cliProcess) {
	t.Helper()
	p.wait(t, 2*time.Minute)
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s", p.state, p.stderr)
	}
	checkOneMeasuredKill(t, p)
	logs := p.stderr.String()
	if !strings.Contains(logs, "sent SIGKILL") || !strings.Contains(logs, "exited: killed by SIGKILL") {
		t.Fatalf("no worker process was SIGKILLed:\n%s", logs)
	}
	if n := len(workerStarted.FindAllStringSubmatch(logs, -1)); n != 3 {
		t.Fatalf("%d worker processes started, want 3:\n%s", n, logs)
	}
	checkWorkersGone(t, logs, 3)
}
