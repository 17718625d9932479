package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestRunSinkThrottle: --sink-throttle reaches every executor's sink (the
// reference's too): a run handing R rows to a sink throttled to T rows/s
// takes at least R/T, and its rows still arrive.
func TestRunSinkThrottle(t *testing.T) {
	const rate = 20000.0
	for _, exec := range append([]string{"reference"}, recoveryExecutors()...) {
		t.Run(exec, func(t *testing.T) {
			args := append([]string{"run", "--executor", exec, "--job", "etl",
				"--input", "gen:records=8000,keys=200,partitions=2,seed=5",
				"--output", filepath.Join(t.TempDir(), "out"), "--storage", "file://" + t.TempDir(),
				"--sink-throttle", "20000", "--summary", "json"}, quickSettings[exec]...)
			code, stdout, stderr := rewind(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s struct {
				RowsOut      int64   `json:"rows_out"`
				ResolvedRows int64   `json:"resolved_rows"`
				WallMs       float64 `json:"wall_ms"`
			}
			if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
				t.Fatalf("summary: %v\n%s", err, stdout)
			}
			// etl writes a row for most records: enough for the throttle
			// to take most of the run.
			if s.RowsOut < 2000 || s.ResolvedRows == 0 {
				t.Fatalf("rows out %d, resolved %d; want most of the 8,000 records written", s.RowsOut, s.ResolvedRows)
			}
			if least := float64(s.RowsOut) / rate * 1000 * 0.9; s.WallMs < least {
				t.Fatalf("%d rows through a sink of %v rows/s in %.0f ms, want at least %.0f ms", s.RowsOut, rate, s.WallMs, least)
			}
		})
	}
}
