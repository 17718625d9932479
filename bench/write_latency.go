package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteDir writes latency.json into dir and returns the file written.
func (r *LatencyResults) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	f := filepath.Join(dir, "latency.json")
	return []string{f}, os.WriteFile(f, append(js, '\n'), 0o644)
}

// WriteTable writes the table as Markdown (it goes into
// docs/benchmarks.md as printed), then the command of every row.
func (r *LatencyResults) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Measured %s, load average %s, %d CPUs (%s).\n\n", r.Started.Format("2006-01-02 15:04 UTC"),
		r.Machine.LoadAverage, r.Machine.CPUs, r.Machine.GoVersion)
	fmt.Fprintln(w, "| # | run | sink | p50 / p99 / max ms | records/s (offered) | target | holds? |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i, row := range r.Rows {
		figs := fmt.Sprintf("%.1f / %.1f / %.1f", row.P50Ms, row.P99Ms, row.MaxMs)
		rate := fmt.Sprintf("%s (%s)", si(row.RPS), si(row.Rate))
		holds := "—"
		switch {
		case row.Error != "":
			figs, rate, holds = "failed: "+row.Error, "", ""
		case row.Holds != nil && *row.Holds:
			holds = "yes"
		case row.Holds != nil:
			holds = "**no**"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", i+1, row.Name, row.SinkMode, figs, rate, row.Target, holds)
	}
	fmt.Fprintln(w, "\nEach row's command (a fresh output and storage directory each time):")
	fmt.Fprintln(w)
	for i, row := range r.Rows {
		fmt.Fprintf(w, "%d. `%s`\n", i+1, row.Command)
	}
	_, err := fmt.Fprintf(w, "\nreplay: %s\n", r.Command)
	return err
}

// si writes a rate as 1.00 M or 99.6 k.
func si(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
