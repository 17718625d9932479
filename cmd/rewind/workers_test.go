package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// An executor that does not run its workers as processes refuses
// --workers process with a usage error naming it; one that does (its
// Traits say so) is not refused here.
func TestWorkersProcessIsRefusedByAnExecutorWithoutIt(t *testing.T) {
	refused := 0
	for _, e := range registry {
		if e.Traits().ProcessWorkers {
			if _, ok := e.(run.ProcessWorker); !ok {
				t.Errorf("executor %s says it runs worker processes but does not implement run.ProcessWorker", e.Name())
			}
			continue
		}
		refused++
		code, _, stderr := rewind(t, "run", "--executor", e.Name(), "--workers", "process", "--output", t.TempDir(),
			"--storage", t.TempDir(), "--input", "gen:records=10")
		if code != exitUsage || !strings.Contains(stderr, "--workers process") || !strings.Contains(stderr, "executor "+e.Name()) {
			t.Errorf("%s --workers process: exit %d, stderr %q; want exit 2 naming the executor", e.Name(), code, stderr)
		}
	}
	if refused == 0 {
		t.Fatal("every executor runs worker processes: nothing was refused")
	}
	code, _, stderr := rewind(t, "run", "--executor", "diskphase", "--workers", "threads", "--output", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, `invalid --workers "threads"`) {
		t.Errorf("--workers threads: exit %d, stderr %q; want exit 2 naming the value", code, stderr)
	}
}

// `rewind worker` takes its token from the environment only: without it
// it says where it looks; with a wrong one the coordinator refuses it.
func TestWorkerWithoutTheTokenIsRefused(t *testing.T) {
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l, err := wire.Listen("", wire.ListenConfig{Token: token, Conn: wire.Options{Log: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv(run.TokenEnv, "")
	code, _, stderr := rewind(t, "worker", "--coordinator", l.Addr(), "--id", "0")
	if code != exitFailure || !strings.Contains(stderr, run.TokenEnv) {
		t.Errorf("no token: exit %d, stderr %q; want exit 1 naming $%s", code, stderr, run.TokenEnv)
	}
	t.Setenv(run.TokenEnv, strings.Repeat("0", len(token)))
	code, _, stderr = rewind(t, "worker", "--coordinator", l.Addr(), "--id", "0")
	if code != exitFailure || !strings.Contains(stderr, "wrong token") {
		t.Errorf("wrong token: exit %d, stderr %q; want exit 1 and the refusal", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if c, h, err := l.Accept(ctx); err == nil {
		c.Close()
		t.Fatalf("a worker with a wrong token was accepted (hello %+v)", h)
	}
	code, _, stderr = rewind(t, "worker", "--id", "0")
	if code != exitUsage || !strings.Contains(stderr, "--coordinator") {
		t.Errorf("no --coordinator: exit %d, stderr %q; want exit 2", code, stderr)
	}
}

// workerStarted is the -v log line of a worker process started.
var workerStarted = regexp.MustCompile(`worker (\d+) \(incarnation (\d+)\) started: pid (\d+)`)

// TestRunWithWorkerProcessesSIGKILLsOne: `rewind run --workers process`
// (this test binary as rewind, its workers `rewind worker`) with worker 1
// killed: the kill is a SIGKILL of a real process, the output equals an
// independent count with no duplicate, the bill's detect and acquire are
// measured, and no worker process outlives the run.
func TestRunWithWorkerProcessesSIGKILLsOne(t *testing.T) {
	dir := t.TempDir()
	const spec = "gen:records=60000,keys=500,partitions=2,seed=4"
	p := startCLI(t, dir, "run", "--executor", "diskphase", "--workers", "process", "--job", "keyed-count",
		"--input", spec, "--job-records", "20000", "--sink-mode", "transactional", "--output", "out", "--storage", "data",
		"--fail", "worker=1,after-records=25000", "--summary", "json", "--progress", "none", "-v")
	checkOneSIGKILLedRun(t, p)
	checkKeyedCountOutput(t, filepath.Join(dir, "out"), spec)
}

// TestWorkerProcessesReadARelativeFileInput: a worker process runs in a
// fresh directory of its own, and still reads --input file:in.csv given
// relative to the command's.
func TestWorkerProcessesReadARelativeFileInput(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("id,key,value,ts\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "%d,%d,%d,%d\n", i, i%7, i%5, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startCLI(t, dir, "run", "--executor", "diskphase", "--workers", "process", "--job", "keyed-count",
		"--input", "file:in.csv", "--job-records", "1000", "--output", "out", "--storage", "data", "--summary", "json", "--progress", "none")
	p.wait(t, 2*time.Minute)
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s", p.state, p.stderr)
	}
	var s report.Summary
	if err := json.Unmarshal([]byte(lastLine(p.stdout.String())), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, p.stdout.String())
	}
	if s.RecordsIn != 3000 || s.ResolvedRows != 7 {
		t.Fatalf("records in %d, resolved rows %d; want 3000 and 7", s.RecordsIn, s.ResolvedRows)
	}
}

// checkOneMeasuredKill: the run p printed a JSON summary with one crash
// whose recovery's detect and acquire were measured, not modelled.
func checkOneMeasuredKill(t *testing.T, p *cliProcess) {
	t.Helper()
	var s report.Summary
	if err := json.Unmarshal([]byte(lastLine(p.stdout.String())), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, p.stdout.String())
	}
	if s.Crashes != 1 || len(s.Recoveries) != 1 {
		t.Fatalf("%d crashes, %d recoveries; want 1 and 1", s.Crashes, len(s.Recoveries))
	}
	r := s.Recoveries[0]
	if r.DetectMs == nil || r.AcquireMs == nil || *r.AcquireMs <= 0 || len(r.Modelled) != 0 {
		t.Fatalf("recovery %q: detect %v acquire %v modelled %v; want both measured", r.Cause, r.DetectMs, r.AcquireMs, r.Modelled)
	}
}

// checkKeyedCountOutput: the keyed-count output in out resolves, with no
// duplicate, to what an independent count of spec gives.
func checkKeyedCountOutput(t *testing.T, out, spec string) {
	t.Helper()
	j, err := job.Build("keyed-count", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	got, st, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	want := independentKeyedCount(t, spec)
	if len(got.Rows) != len(want) || st.DuplicateRows != 0 {
		t.Fatalf("resolved %d keys (%d duplicates), the independent count has %d", len(got.Rows), st.DuplicateRows, len(want))
	}
	for _, row := range got.Rows { // key, count, sum, _version
		if w := want[row[0]]; row[1] != w[0] || row[2] != w[1] {
			t.Fatalf("key %d: count %d sum %d, independent count %v", row[0], row[1], row[2], w)
		}
	}
}
