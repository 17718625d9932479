package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestProgressBarShowsTheRun forces the bar into a buffer (a terminal gets
// it by default): it names the executor and ends at the whole input read.
func TestProgressBarShowsTheRun(t *testing.T) {
	code, stdout, stderr := rewind(t, "run", "--executor", "microbatch", "--input", "gen:records=3000,keys=30,rate=6000",
		"--output", filepath.Join(t.TempDir(), "o"), "--storage", "file://"+t.TempDir(), "--trigger", "50ms", "--progress", "bar")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"microbatch ", "3000/3000 read", "recovery points"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the progress bar lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stdout, "3000/3000 read") {
		t.Errorf("the bar went to stdout, where the summary is:\n%s", stdout)
	}
}

// TestNoProgressBarUnlessATerminal: by default (auto) a run whose stderr is
// not a terminal gets no bar, so logs and pipes stay clean.
func TestNoProgressBarUnlessATerminal(t *testing.T) {
	code, _, stderr := rewind(t, "run", "--executor", "microbatch", "--input", "gen:records=2000",
		"--output", filepath.Join(t.TempDir(), "o"), "--storage", "file://"+t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, " read") {
		t.Errorf("a bar was drawn into a non-terminal:\n%s", stderr)
	}
}

func TestEventCounterCountsRecoveryPointsAndCrashes(t *testing.T) {
	var ec eventCounter
	w := ec.writer()
	lines := `{"event":"checkpoint","status":"completed","id":1}
{"event":"checkpoint","status":"failed","id":2}
{"event":"batch","batch_id":0}
{"event":"batch","batch_id":1,"status":"failed","reason":"cut short"}
{"event":"job_committed","job":0}
{"event":"crash","cause":"x"}
{"event":"recovery"}
{"event":"crash","cau`
	// Written in two pieces that split a line: the tail of the first
	// write completes in the second.
	w.Write([]byte(lines))
	w.Write([]byte("se\":\"y\"}\n"))
	if got := ec.snapshot(); got.points != 3 || got.crashes != 2 {
		t.Errorf("counted %+v, want 3 recovery points and 2 crashes", got)
	}
}

func TestCountAndPluralText(t *testing.T) {
	for n, want := range map[int64]string{950: "950", 12345: "12.3k", 4_560_000: "4.56M", 2_000_000_000: "2.00G"} {
		if got := countText(n); got != want {
			t.Errorf("countText(%d) = %q, want %q", n, got, want)
		}
	}
	if plural(1, "crash") != "1 crash" || plural(2, "crash") != "2 crashes" || plural(0, "recovery point") != "0 recovery points" {
		t.Error("plural")
	}
}
