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
