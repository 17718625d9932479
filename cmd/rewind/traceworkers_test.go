package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The diagram's crash and the bill's crash of one run, in the text trace.
var (
	drawnCrash  = regexp.MustCompile(`(?m)^\s*([0-9.]+) ms  CRASH of worker 1`)
	billedCrash = regexp.MustCompile(`(?m)^\s*crash 1 at ([0-9.]+) ms`)
	measuredBit = regexp.MustCompile(`detect ([0-9.]+) ms, acquire ([0-9.]+) ms`)
)

// TestTraceWithWorkerProcesses: `rewind trace --executor diskphase
// --workers process` SIGKILLs a real worker process and draws the crash
// where it happened: at the kill, as the bill says, not once the
// replacement has joined (detect and acquire later, both measured and
// non-zero). The result equals the reference, and no worker process
// outlives the trace.
func TestTraceWithWorkerProcesses(t *testing.T) {
	dir := t.TempDir()
	p := startCLI(t, dir, "trace", "--executor", "diskphase", "--workers", "process", "-v")
	p.wait(t, 2*time.Minute)
	out, logs := p.stdout.String(), p.stderr.String()
	if !p.state.Success() {
		t.Fatalf("exit %s; stdout:\n%s\nstderr:\n%s", p.state, out, logs)
	}
	if !strings.Contains(out, "result: equals the reference executor's") {
		t.Fatalf("no equal result:\n%s", out)
	}
	if !strings.Contains(logs, "sent SIGKILL") {
		t.Fatalf("no worker process was SIGKILLed:\n%s", logs)
	}
	drawn, billed, bill := drawnCrash.FindStringSubmatch(out), billedCrash.FindStringSubmatch(out), measuredBit.FindStringSubmatch(out)
	if drawn == nil || billed == nil || bill == nil {
		t.Fatalf("no drawn crash, billed crash or detect and acquire in:\n%s", out)
	}
	at, _ := strconv.ParseFloat(drawn[1], 64)
	killed, _ := strconv.ParseFloat(billed[1], 64)
	detect, _ := strconv.ParseFloat(bill[1], 64)
	acquire, _ := strconv.ParseFloat(bill[2], 64)
	if acquire <= 0 {
		t.Fatalf("acquire %.1f ms: no replacement process was started and measured:\n%s", acquire, out)
	}
	// Both times count from the run's start, to within the recorder's
	// head start (microseconds) and the 0.1 ms they are printed to.
	if d := at - killed; d < -1 || d > 1 {
		t.Fatalf("the crash is drawn at %.1f ms and billed at %.1f ms (detect %.1f, acquire %.1f): drawn late or early:\n%s", at, killed, detect, acquire, out)
	}
	started := workerStarted.FindAllStringSubmatch(logs, -1)
	if len(started) != 3 { // two, and worker 1's replacement
		t.Fatalf("%d worker processes started, want 3:\n%s", len(started), logs)
	}
	for _, m := range started {
		pid, _ := strconv.Atoi(m[3])
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("worker %s (pid %d) outlived the trace", m[1], pid)
		}
	}
}
