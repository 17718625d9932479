package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRecordwiseTraceWithWorkerProcesses: `rewind trace --executor
// recordwise --workers process`, both barrier modes, SIGKILLs worker 1's
// process and draws what ran inside the worker processes (their tasks'
// snapshots and markers, a replay after the restore) with the crash where
// the bill has it, at the kill. The result equals the reference, and no
// worker process outlives the trace.
func TestRecordwiseTraceWithWorkerProcesses(t *testing.T) {
	for _, barriers := range []string{"aligned", "unaligned"} {
		t.Run(barriers, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := startCLI(t, dir, "trace", "--executor", "recordwise", "--barriers", barriers, "--workers", "process", "-v")
			p.wait(t, 2*time.Minute)
			out, logs := p.stdout.String(), p.stderr.String()
			if !p.state.Success() {
				t.Fatalf("exit %s; stdout:\n%s\nstderr:\n%s", p.state, out, logs)
			}
			if !strings.Contains(out, "result: equals the reference executor's") || !strings.Contains(logs, "sent SIGKILL") {
				t.Fatalf("no equal result, or no worker process SIGKILLed:\n%s\n%s", out, logs)
			}
			drawn, billed := drawnCrash.FindStringSubmatch(out), billedCrash.FindStringSubmatch(out)
			if drawn == nil || billed == nil {
				t.Fatalf("no drawn or billed crash in:\n%s", out)
			}
			at, _ := strconv.ParseFloat(drawn[1], 64)
			killed, _ := strconv.ParseFloat(billed[1], 64)
			if d := at - killed; d < -1 || d > 1 {
				t.Fatalf("the crash is drawn at %.1f ms and billed at %.1f ms:\n%s", at, killed, out)
			}
			// The tasks run in the worker processes: what the diagram
			// shows of them came from there. Each lane of both workers
			// has a durable snapshot and a marker, and the restarted
			// sources replay.
			lanes := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				for _, name := range []string{"source→filter #0", "source→filter #1", "count→sink #0", "count→sink #1"} {
					if strings.HasPrefix(l, name+" ") {
						lanes[name] += l[len(name):]
					}
				}
			}
			for name, marks := range lanes {
				if !strings.Contains(marks, "S") || !strings.Contains(marks, ">") {
					t.Errorf("lane %s shows no durable snapshot or no marker: %q", name, marks)
				}
			}
			if len(lanes) != 4 || !strings.Contains(out, "replay until") {
				t.Errorf("want the four task lanes drawn and a replay after the restore:\n%s", out)
			}
			started := workerStarted.FindAllStringSubmatch(logs, -1)
			if len(started) != 3 { // two, and worker 1's replacement
				t.Fatalf("%d worker processes started, want 3:\n%s", len(started), logs)
			}
			for _, m := range started {
				if _, err := os.Stat(fmt.Sprintf("/proc/%s", m[3])); err == nil {
					t.Errorf("worker %s (pid %s) outlived the trace", m[1], m[3])
				}
			}
		})
	}
}
