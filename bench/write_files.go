package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteDir writes everything a bench produced into dir (created if
// needed) and returns the paths written: results.json, results.csv,
// timeline.csv, timeline_events.csv, every figure as SVG and PNG, and
// report.html. docs/output-contract.md describes each file.
func (r *Results) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench output: %w", err)
	}
	r.Version = ResultsVersion
	var paths []string
	for _, w := range []struct {
		name  string
		write func(string) error
	}{
		{"results.json", r.writeJSON},
		{"results.csv", r.writeResultsCSV},
		{"timeline.csv", r.writeTimelineCSV},
		{"timeline_events.csv", r.writeEventsCSV},
	} {
		p := filepath.Join(dir, w.name)
		if err := w.write(p); err != nil {
			return paths, fmt.Errorf("bench output: %w", err)
		}
		paths = append(paths, p)
	}
	groups := r.Aggregate()
	figs, err := r.writePlots(dir, groups)
	if err != nil {
		return paths, fmt.Errorf("bench output: drawing the figures: %w", err)
	}
	for _, f := range figs {
		paths = append(paths, f.SVG, f.PNG)
	}
	p := filepath.Join(dir, "report.html")
	if err := r.writePage(p, groups, figs); err != nil {
		return paths, fmt.Errorf("bench output: %w", err)
	}
	paths = append(paths, p)
	r.dir, r.files = dir, paths
	return paths, nil
}

func (r *Results) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResults reads a results.json, refusing another version.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, &FormatError{Path: path, Why: "not a rewind bench results.json: " + err.Error()}
	}
	if r.Version == 0 {
		return nil, &FormatError{Path: path, Why: "no version in it: not a results.json of rewind bench (an older report.json?)"}
	}
	if r.Version != ResultsVersion {
		return nil, &FormatError{Path: path, Why: fmt.Sprintf("results version %d, this rewind reads version %d (rerun rewind bench to get one)", r.Version, ResultsVersion)}
	}
	return &r, nil
}

// FormatError is a file that is not a results.json this rewind reads.
type FormatError struct{ Path, Why string }

func (e *FormatError) Error() string { return e.Path + ": " + e.Why }
