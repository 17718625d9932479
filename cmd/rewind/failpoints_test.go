package main

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
)

// TestEveryExecutorHasTheRunPoints: the run driver's points are in every
// executor's --list-fail-points after its own (one name per line on
// stdout; stderr says they are kill=process only), and every executor's
// validation accepts them with kill=process.
func TestEveryExecutorHasTheRunPoints(t *testing.T) {
	for _, name := range executorNames() {
		if name == "reference" {
			continue
		}
		code, stdout, stderr := rewind(t, "run", "--executor", name, "--list-fail-points")
		lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
		own := executors[name].FailPoints()
		if code != 0 || len(lines) != len(own)+len(fault.RunPoints) {
			t.Fatalf("%s --list-fail-points: exit %d, %d lines (want %d own + %d run points):\n%s%s", name, code, len(lines), len(own), len(fault.RunPoints), stdout, stderr)
		}
		for i, p := range fault.RunPoints {
			if got := lines[len(own)+i]; got != p || !strings.Contains(stderr, p) || !strings.Contains(stderr, "kill=process only") {
				t.Errorf("%s --list-fail-points line %q, stderr %q; want %s, said on stderr to be kill=process only", name, got, stderr, p)
			}
			spec, err := fault.Parse("point=" + p + ",kill=process")
			if err == nil {
				err = fault.Validate([]fault.Spec{spec}, own, 2)
			}
			if err != nil {
				t.Errorf("%s: --fail point=%s,kill=process refused: %v", name, p, err)
			}
		}
	}
}

// TestProcessKillRefusals: kill=process where it cannot work, and a run
// point without it, exit 2 with one line saying why.
func TestProcessKillRefusals(t *testing.T) {
	cases := map[string][]string{
		"kill=process only":          {"run", "--executor", "recordwise", "--fail", "point=run.before-finish"},
		"occurrence must be 1":       {"run", "--executor", "diskphase", "--fail", "point=run.after-finish,occurrence=2,kill=process"},
		"goes with point=":           {"run", "--executor", "microbatch", "--fail", "worker=0,after-records=5,kill=process"},
		"kill must be process":       {"run", "--executor", "microbatch", "--fail", "point=batch.after-commit,kill=worker"},
		"no worker is left":          {"run", "--executor", "microbatch", "--fail", "worker=0,after-records=5,after-point=run.before-finish"},
		"only rewind run does":       {"trace", "--executor", "microbatch", "--fail", "point=batch.after-commit,kill=process"},
		`unknown point "batch.after`: {"run", "--executor", "recordwise", "--fail", "point=batch.after-commit,kill=process"},
	}
	for phrase, args := range cases {
		code, _, stderr := rewind(t, args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != exitUsage || len(lines) != 1 || !strings.Contains(stderr, phrase) {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit 2 and one line containing %q", strings.Join(args, " "), code, stderr, phrase)
		}
	}
}
