package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/bench/benchtest"
)

func writeResults(t *testing.T, dir string, r *bench.Results) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "results.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBenchCompare(t *testing.T) {
	const seed = 3
	t.Logf("fixture seed %d", seed)
	dir := t.TempDir()
	old := writeResults(t, filepath.Join(dir, "old"), benchtest.Results(benchtest.Options{Seed: seed}))
	new := writeResults(t, filepath.Join(dir, "new"), benchtest.Results(benchtest.Options{Seed: seed + 1, Slower: 1.5}))
	other := writeResults(t, filepath.Join(dir, "other"), benchtest.Results(benchtest.Options{Seed: seed,
		Contestants: []string{"w", "x", "y", "z"}}))
	v1 := filepath.Join(dir, "v1.json")
	if err := os.WriteFile(v1, []byte(`{"version":1}`), 0o644); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := rewind(t, "bench", "compare", old, new)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"NEW/OLD", "recordwise/aligned:", "microbatch:", "diskphase:", "recovered", "Set-up differs: seed 3 → 4"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout)
		}
	}
	for _, l := range strings.Split(stdout, "\n") {
		if utf8.RuneCountInString(l) > 100 {
			t.Errorf("line wider than 100 columns: %q", l)
		}
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"one argument", []string{old}, exitUsage, "accepts 2 arg(s)"},
		{"missing file", []string{filepath.Join(dir, "nope.json"), new}, exitUsage, "nope.json: no such file"},
		{"a directory", []string{filepath.Join(dir, "old"), new}, exitUsage, "is a directory; give its results.json"},
		{"wrong version", []string{old, v1}, exitUsage, "results version 1, this rewind reads version 2"},
		{"unreadable", []string{filepath.Join(old, "x"), new}, exitFailure, "not a directory"},
		{"nothing in common", []string{old, other}, exitUsage, "no contestant (at the same sweep point) is in both"},
	} {
		code, _, stderr := rewind(t, append([]string{"bench", "compare"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", c.name, code, stderr, c.code, c.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
			t.Errorf("%s: the error is %d lines, want one", c.name, n+1)
		}
	}
}
