package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecordwiseRunWithWorkerProcessesSIGKILLsOne: `rewind run --executor
// recordwise --workers process` (this test binary as rewind, its workers
// `rewind worker`) under both barrier modes, with worker 1 SIGKILLed once
// a recovery point is durable: the kill ends a real process, every task
// restarts from the point on a replacement, the output equals an
// independent count with no duplicate, the bill's detect and acquire are
// measured, and no worker process outlives the run.
func TestRecordwiseRunWithWorkerProcessesSIGKILLsOne(t *testing.T) {
	for _, barriers := range []string{"aligned", "unaligned"} {
		t.Run(barriers, func(t *testing.T) {
			dir := t.TempDir()
			const spec = "gen:records=60000,keys=500,partitions=2,seed=4,rate=100000"
			p := startCLI(t, dir, "run", "--executor", "recordwise", "--workers", "process", "--barriers", barriers,
				"--job", "keyed-count", "--input", spec, "--checkpoint-interval", "50ms", "--sink-mode", "idempotent",
				"--output", "out", "--storage", "data", "--fail", "worker=1,after-records=25000,after-point=checkpoint.after-metadata",
				"--summary", "json", "--progress", "none", "-v")
			p.wait(t, 2*time.Minute)
			if !p.state.Success() {
				t.Fatalf("exit %s; stderr:\n%s", p.state, p.stderr)
			}
			checkOneMeasuredKill(t, p)
			logs := p.stderr.String()
			if !strings.Contains(logs, "sent SIGKILL") || !strings.Contains(logs, "exited: killed by SIGKILL") {
				t.Fatalf("no worker process was SIGKILLed:\n%s", logs)
			}
			if n := len(workerStarted.FindAllStringSubmatch(logs, -1)); n != 3 { // two, and worker 1's replacement
				t.Fatalf("%d worker processes started, want 3:\n%s", n, logs)
			}
			checkWorkersGone(t, logs, 3)
			checkKeyedCountOutput(t, filepath.Join(dir, "out"), spec)
		})
	}
}

// TestRecordwiseWorkerProcessTaskPoint: through the CLI, a fault at a
// point only recordwise's tasks pass SIGKILLs the worker process whose
// task reached it (the task asked its coordinator there), and the run
// recovers to an independent count with its workers gone.
func TestRecordwiseWorkerProcessTaskPoint(t *testing.T) {
	dir := t.TempDir()
	const spec = "gen:records=60000,keys=500,partitions=2,seed=5,rate=100000"
	p := startCLI(t, dir, "run", "--executor", "recordwise", "--workers", "process", "--job", "keyed-count", "--input", spec,
		"--checkpoint-interval", "50ms", "--sink-mode", "idempotent", "--output", "out", "--storage", "data",
		"--fail", "point=checkpoint.mid-part-write,occurrence=3", "--summary", "json", "--progress", "none", "-v")
	p.wait(t, 2*time.Minute)
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s", p.state, p.stderr)
	}
	checkOneMeasuredKill(t, p)
	logs := p.stderr.String()
	if !strings.Contains(logs, "sent SIGKILL") || !strings.Contains(logs, "exited: killed by SIGKILL") {
		t.Fatalf("no worker process was SIGKILLed at the point:\n%s", logs)
	}
	checkWorkersGone(t, logs, 3)
	checkKeyedCountOutput(t, filepath.Join(dir, "out"), spec)
}
