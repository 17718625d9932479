package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// TestBenchLatencyFiguresAreTheRunsOwn: a short latency table, each row a
// child `rewind run` (this test binary as the CLI). Every row's figures
// must be the ones in the summary line its run printed, and the row's
// command must be the run it started, output and storage aside. With
// --workers inproc,process every row comes twice, the second time with
// its workers as processes.
func TestBenchLatencyFiguresAreTheRunsOwn(t *testing.T) {
	t.Setenv(cliChildEnv, "1")
	out := filepath.Join(t.TempDir(), "latency")
	code, stdout, stderr := rewind(t, "bench", "latency", "--duration", "300ms", "--workers", "inproc,process", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "latency.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.LatencyResults
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	var cases []bench.LatencyCase
	for _, m := range []run.WorkerMode{run.WorkersInproc, run.WorkersProcess} {
		for _, e := range registry {
			cases = append(cases, latencyCases(e, 300_000_000, m)...)
		}
	}
	if len(res.Rows) != len(cases) || len(cases) != 18 {
		t.Fatalf("%d rows for %d cases; want 18 (three executors, three sink modes, two worker modes)", len(res.Rows), len(cases))
	}
	for i, row := range res.Rows {
		var s report.Summary
		if err := json.Unmarshal([]byte(row.Summary), &s); err != nil || s.LatencyMs == nil {
			t.Fatalf("row %d: summary %q: %v", i+1, row.Summary, err)
		}
		if row.P50Ms != s.LatencyMs.P50 || row.P99Ms != s.LatencyMs.P99 || row.MaxMs != s.LatencyMs.Max || row.RPS != s.ThroughputRPS {
			t.Errorf("row %d: %v/%v/%v at %v, its run printed %+v at %v", i+1, row.P50Ms, row.P99Ms, row.MaxMs, row.RPS, *s.LatencyMs, s.ThroughputRPS)
		}
		if s.SinkMode != row.SinkMode || s.RecordsIn != int64(row.Rate*0.3) {
			t.Errorf("row %d: the run was %s over %d records, the row says %s at %g records/s for 300ms", i+1, s.SinkMode, s.RecordsIn, row.SinkMode, row.Rate)
		}
		want := bench.CommandLine(slices.Concat([]string{"run"}, cases[i].Args, []string{"--sink-mode", cases[i].SinkMode, "--summary", "json"}))
		if !strings.HasPrefix(row.Command, want+" --output ") {
			t.Errorf("row %d: command %q, want it to start %q", i+1, row.Command, want)
		}
		if inProcesses := strings.Contains(row.Command, " --workers process "); inProcesses != (i >= 9) || row.Workers != string(cases[i].Workers) {
			t.Errorf("row %d (workers %q): command %q, want --workers process in rows 10-18 only", i+1, row.Workers, row.Command)
		}
		if !strings.Contains(stdout, "`"+row.Command+"`") {
			t.Errorf("row %d's command is not in the table:\n%s", i+1, stdout)
		}
	}
}

// TestBenchStateMeasuresARun: one small state run through a child: the
// crash fired and was billed, the storage was read back, the child's peak
// RSS is there.
func TestBenchStateMeasuresARun(t *testing.T) {
	t.Setenv(cliChildEnv, "1")
	out := filepath.Join(t.TempDir(), "state")
	code, stdout, stderr := rewind(t, "bench", "state", "--jobs", "keyed-count", "--keys", "1000",
		"--min-records", "200000", "--executors", defaultExecutor, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.StateResults
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(res.Rows))
	}
	r := res.Rows[0]
	if _, err := os.Stat(filepath.Join(out, "state-restore.svg")); err != nil {
		t.Error(err)
	}
	if r.Error != "" || r.Records != 200000 || r.RPS <= 0 || r.MaxRSSBytes < 1<<20 || r.ReadBytes <= 0 || r.Points < 1 || r.RecoveredMs <= 0 {
		t.Errorf("row %+v: want a billed crash, storage read back and the child's peak RSS", r)
	}
}

// TestBenchStateRefusesBadFlags: exit 2 and one line naming the flag.
func TestBenchStateRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "nope"},
		{"--keys", "10"},
		{"--keys", "1000,x"},
		{"--min-records", "5"},
		{"--executors", "nope"},
	} {
		code, _, stderr := rewind(t, append([]string{"bench", "state"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 1 || !strings.Contains(stderr, strings.TrimPrefix(args[0], "--")) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a line naming the flag", args, code, stderr)
		}
	}
	code, _, stderr := rewind(t, "bench", "latency", "--duration", "1ms")
	if code != 2 || !strings.Contains(stderr, "--duration") {
		t.Errorf("latency --duration 1ms: exit %d, %q", code, stderr)
	}
}
