package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// writeSeries writes s's run over time to path (--series), when one is
// named: bench state reads the recovery points' durations from it.
func writeSeries(path string, s *report.Summary) error {
	if path == "" || s.Series == nil {
		return nil
	}
	b, err := json.Marshal(s.Series)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--series: %w", err)
	}
	return nil
}
