package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// writeCSV writes rows id,key,value,ts with value(i) for i in [from, to).
func writeCSV(t *testing.T, path string, from, to int, value func(i int) string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,key,value,ts\n")
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "%d,%d,%s,%d\n", i, i%17, value(i), i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A run that fails late leaves its append output marked incomplete, with
// the reason, the run and what to do; the marker is not output, and the
// --resume that completes the output removes it.
func TestRuntimeErrorMarksTheOutputIncomplete(t *testing.T) {
	dir := t.TempDir()
	in, out, store := filepath.Join(dir, "in"), filepath.Join(dir, "out"), "file://"+filepath.Join(dir, "store")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	good := func(i int) string { return fmt.Sprint(i % 50) }
	writeCSV(t, filepath.Join(in, "a.csv"), 0, 3000, good)
	// b.csv has a value that is not a number near its end.
	writeCSV(t, filepath.Join(in, "b.csv"), 3000, 6000, func(i int) string {
		if i == 5900 {
			return "x"
		}
		return good(i)
	})
	args := []string{"run", "--executor", "microbatch", "--trigger", "5ms", "--max-batch-records", "500", "--sink-mode", "append",
		"--input", "file:" + in, "--output", out, "--storage", store}
	code, _, stderr := rewind(t, args...)
	marker := filepath.Join(out, outdir.IncompleteName)
	if code != exitFailure || strings.Count(stderr, "\n") != 2 || !strings.Contains(stderr, "b.csv:2902") ||
		!strings.Contains(stderr, "the output in "+out+" is incomplete ("+outdir.IncompleteName+" says why and what to do)") {
		t.Fatalf("the failing run: exit %d, stderr %q; want exit 1, the run id line and one error line naming the row and %s", code, stderr, outdir.IncompleteName)
	}
	m := runIDLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no run id line: %q", stderr)
	}
	text, err := os.ReadFile(marker)
	if err != nil {
		t.Fatalf("no marker after the failure: %v", err)
	}
	for _, want := range []string{"Run:    " + m[1], "Why:    microbatch run of keyed-count failed", "b.csv:2902", "--resume " + m[1]} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the marker does not say %q:\n%s", want, text)
		}
	}
	j, err := job.Build("keyed-count", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sink.Resolve(out, j.Output); err != nil {
		t.Fatalf("resolution reads the marker as output: %v", err)
	}
	// The cause dealt with, --resume completes the output and removes it.
	writeCSV(t, filepath.Join(in, "b.csv"), 3000, 6000, good)
	if code, _, stderr := rewind(t, append(args, "--resume")...); code != 0 {
		t.Fatalf("the resume: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the marker is still there after the resume completed the output (%v)", err)
	}
	got, _, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	if d := got.Diff(referenceOutput(t, j, []string{"--input", "file:" + in}), 5); d != "" {
		t.Fatalf("the resumed output differs from the reference:\n%s", d)
	}
}

// A process that dies leaves the marker it wrote before its first output.
func TestKilledProcessLeavesTheOutputMarkedIncomplete(t *testing.T) {
	dir := t.TempDir()
	out, store := filepath.Join(dir, "out"), "file://"+filepath.Join(dir, "store")
	args := []string{"run", "--executor", "microbatch", "--trigger", "5ms", "--max-batch-records", "2000", "--input", "gen:records=20000,keys=40",
		"--output", out, "--storage", store, "--progress", "none"}
	p := startCLI(t, dir, append(args, "--fail", "point=batch.after-commit,occurrence=2,kill=process")...)
	p.wait(t, time.Minute)
	if ok, how := p.killedBySIGKILL(); !ok {
		t.Fatalf("the process was not killed: %s; stderr %s", how, p.stderr)
	}
	text, err := os.ReadFile(filepath.Join(out, outdir.IncompleteName))
	if err != nil || !strings.Contains(string(text), "the run is in progress") || !strings.Contains(string(text), "--resume "+p.stderr.id) {
		t.Fatalf("after the kill the marker reads %q (%v); want the in-progress marker of run %s", text, err, p.stderr.id)
	}
	if code, _, stderr := rewind(t, append(args, "--resume")...); code != 0 {
		t.Fatalf("the resume: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, outdir.IncompleteName)); !os.IsNotExist(err) {
		t.Fatalf("the marker is still there after the resume completed the output (%v)", err)
	}
}

// A run refused before its first row (here the reference's need for a
// bounded input, found by the executor) leaves no marker: there is no
// output to mark, and the directory can be used again.
func TestRefusedRunLeavesNoMarker(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := rewind(t, "run", "--executor", "reference", "--input", "gen:records=0", "--output", out)
	if code != exitUsage || !strings.Contains(stderr, "bounded") {
		t.Fatalf("exit %d, stderr %q; want exit 2 about a bounded input", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, outdir.IncompleteName)); !os.IsNotExist(err) {
		t.Fatalf("a refused run left %s (%v)", outdir.IncompleteName, err)
	}
	if code, _, stderr := rewind(t, "run", "--executor", "reference", "--input", "gen:records=100", "--output", out); code != 0 {
		t.Fatalf("the directory cannot be used again: exit %d: %s", code, stderr)
	}
}
