package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTracesOfWorkerProcesses: `rewind trace --workers process` of
// recordwise (both barrier modes) and microbatch SIGKILLs worker 1's
// process and draws what ran inside the worker processes (recordwise's
// tasks' markers and snapshots, microbatch's stages' batches, a replay
// after the restore) with the crash where the bill has it, at the kill.
// The result equals the reference, and no worker process outlives the
// trace.
func TestTracesOfWorkerProcesses(t *testing.T) {
	recordwiseLanes := []string{"source→filter #0", "source→filter #1", "count→sink #0", "count→sink #1"}
	for _, c := range []struct {
		name  string
		args  []string
		lanes []string
		// marks are what every lane of both workers must show: drawn in
		// a worker process and sent, or missing.
		marks string
	}{
		{"recordwise-aligned", []string{"--executor", "recordwise", "--barriers", "aligned"}, recordwiseLanes, "S>"},
		{"recordwise-unaligned", []string{"--executor", "recordwise", "--barriers", "unaligned"}, recordwiseLanes, "S>"},
		{"microbatch", []string{"--executor", "microbatch"}, []string{"filter #0", "filter #1", "count #0", "count #1", "sink #0", "sink #1"}, "-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := startCLI(t, dir, append(append([]string{"trace"}, c.args...), "--workers", "process", "-v")...)
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
			// The work runs in the worker processes: what the diagram
			// shows of it came from there. Every lane of both workers
			// shows the case's marks, and the restarted sources replay.
			lanes := map[string]string{}
			for _, l := range strings.Split(out, "\n") {
				for _, name := range c.lanes {
					if strings.HasPrefix(l, name+" ") {
						lanes[name] += l[len(name):]
					}
				}
			}
			for name, drawn := range lanes {
				for _, mark := range c.marks {
					if !strings.ContainsRune(drawn, mark) {
						t.Errorf("lane %s shows no %q: %q", name, mark, drawn)
					}
				}
			}
			if len(lanes) != len(c.lanes) || !strings.Contains(out, "replay until") {
				t.Errorf("want the lanes %q drawn and a replay after the restore:\n%s", c.lanes, out)
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
