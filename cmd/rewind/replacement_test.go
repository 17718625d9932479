package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
)

// TestRunModelledReplacement: --fail worker=0,at=D kills a worker at a
// time, and --detect-delay and --acquire-delay reach every executor that
// crashes workers: the summary bills the crash at (or after) D, with a
// modelled detect and acquire at least as long as asked.
func TestRunModelledReplacement(t *testing.T) {
	for _, exec := range recoveryExecutors() {
		t.Run(exec, func(t *testing.T) {
			args := append([]string{"run", "--executor", exec, "--job", "keyed-count",
				"--input", "gen:records=20000,keys=500,partitions=2,rate=40000,seed=3",
				"--output", filepath.Join(t.TempDir(), "out"), "--storage", "file://" + t.TempDir(),
				"--fail", "worker=0,at=300ms", "--detect-delay", "100ms", "--acquire-delay", "50ms", "--summary", "json"},
				quickSettings[exec]...)
			code, stdout, stderr := rewind(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s struct {
				Crashes    int `json:"crashes"`
				Recoveries []struct {
					AtMs      *float64 `json:"at_ms"`
					DetectMs  *float64 `json:"detect_ms"`
					AcquireMs *float64 `json:"acquire_ms"`
					Modelled  []string `json:"modelled"`
				} `json:"recoveries"`
			}
			if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			if s.Crashes != 1 || len(s.Recoveries) != 1 {
				t.Fatalf("%d crashes, %d recoveries; want the one timed kill: %s", s.Crashes, len(s.Recoveries), lastLine(stdout))
			}
			r := s.Recoveries[0]
			if r.AtMs == nil || *r.AtMs < 300 || r.DetectMs == nil || *r.DetectMs < 100 || r.AcquireMs == nil || *r.AcquireMs < 50 ||
				!slices.Equal(r.Modelled, []string{"detect", "acquire"}) {
				t.Fatalf("recovery bill wants at_ms >= 300, detect_ms >= 100, acquire_ms >= 50, modelled [detect acquire]: %s", lastLine(stdout))
			}
		})
	}
}
