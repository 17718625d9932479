package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTextSummaryBillsACrashAndListsCheckpoints: the text summary of a
// real run with a worker kill holds the crash's bill and a history table
// with at least one completed checkpoint, their lines within 100 columns.
func TestTextSummaryBillsACrashAndListsCheckpoints(t *testing.T) {
	code, stdout, stderr := rewind(t, "run", "--executor", "recordwise", "--input", "gen:records=20000",
		"--output", filepath.Join(t.TempDir(), "o"), "--storage", "file://"+t.TempDir(),
		"--checkpoint-interval", "5ms", "--fail", "worker=1,after-records=5000", "--summary", "text")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "crashes 1,") {
		t.Fatalf("the worker kill did not fire:\n%s", stdout)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  crash 1 at ([0-9.]+ ms|-): \S`),
		regexp.MustCompile(`(?m)^    detect [0-9.]+ ms, acquire .*, restore [0-9.]+ ms reading (\d+ B|-)$`),
		regexp.MustCompile(`(?m)^    reprocessed .* catch-up .* recovered `),
		regexp.MustCompile(`(?m)^    kind +id +at ms +duration ms +size B +align ms +in-flight B status$`),
		regexp.MustCompile(`(?m)^    checkpoint +\d+ +[0-9.]+ +[0-9.]+ +\d+ +[0-9.]+ +\d+ completed`),
	} {
		if !want.MatchString(stdout) {
			t.Errorf("text summary has no line matching %s:\n%s", want, stdout)
		}
	}
	// The bill and history lines; the older lines (the output path, the
	// notes) are as long as what they name.
	for _, line := range strings.Split(stdout, "\n") {
		if !strings.HasPrefix(line, "  crash ") && !strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "  recovery points, the newest") {
			continue
		}
		if len([]rune(line)) > 100 {
			t.Errorf("line wider than 100 columns: %q", line)
		}
	}
}

// A micro-batch a worker's death cut short is in the history with its
// status and reason, beside the same batch completed when it ran again.
// The kill is in worker 1's first batch: a busy machine ran the 0.4 s
// input in two batches, and never reached its third.
func TestTextSummaryListsAFailedBatch(t *testing.T) {
	code, stdout, stderr := rewind(t, "run", "--executor", "microbatch", "--input", "gen:records=40000,rate=100000",
		"--output", filepath.Join(t.TempDir(), "o"), "--storage", "file://"+t.TempDir(), "--lost-piece-recovery", "rerun-batch",
		"--fail", "point=batch.mid-run,worker=1,occurrence=1", "--summary", "text")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`(?m)^    batch +(\d+) +[0-9.]+ +- +- +- +- failed: cut short: worker 1 died$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no failed batch with its reason in the history:\n%s", stdout)
	}
	if !regexp.MustCompile(`(?m)^    batch +` + m[1] + ` +[0-9.]+ +[0-9.]+ +\d+ +- +- completed$`).MatchString(stdout) {
		t.Errorf("batch %s is not listed as completed after its re-run:\n%s", m[1], stdout)
	}
	if !strings.Contains(stdout, "recovery points: ") || !strings.Contains(stdout, " 1 failed, ") {
		t.Errorf("the counts do not say 1 failed:\n%s", stdout)
	}
}
