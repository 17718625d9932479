package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteDir writes state.json into dir and returns the file written.
func (r *StateResults) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	f := filepath.Join(dir, "state.json")
	return []string{f}, os.WriteFile(f, append(js, '\n'), 0o644)
}

// WriteTable writes the table as Markdown, then every row's command.
func (r *StateResults) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "Measured %s, load average %s, %d CPUs (%s).\n\n", r.Started.Format("2006-01-02 15:04 UTC"),
		r.Machine.LoadAverage, r.Machine.CPUs, r.Machine.GoVersion)
	fmt.Fprintln(w, "| # | job | keys | records | contestant | points | point MB | point ms | restore MB | restore ms | restore MB/s | storage read MB/s | restore / read | reprocess ms | recovered ms | M rec/s | peak RSS MB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, row := range r.Rows {
		head := fmt.Sprintf("| %d | %s | %s | %s | %s |", i+1, row.Job, count(row.Keys), count(row.Records), row.Contestant)
		if row.Error != "" {
			fmt.Fprintf(w, "%s failed: %s |||||||||||| %.0f |\n", head, row.Error, float64(row.MaxRSSBytes)/1e6)
			continue
		}
		ratio := "—"
		if row.ReadMBps > 0 && row.RestoreMBps > 0 {
			ratio = fmt.Sprintf("%.2f", row.RestoreMBps/row.ReadMBps)
		}
		fmt.Fprintf(w, "%s %d | %.1f | %.0f | %.1f | %.0f | %.0f | %.0f | %s | %.0f | %.0f | %.2f | %.0f |\n", head,
			row.Points, float64(row.PointBytes)/1e6, row.PointMedianMs, float64(row.RestoreBytes)/1e6, row.RestoreMs,
			row.RestoreMBps, row.ReadMBps, ratio, row.ReprocessMs, row.RecoveredMs, row.RPS/1e6, float64(row.MaxRSSBytes)/1e6)
	}
	fmt.Fprintln(w, "\nEach row's command:")
	fmt.Fprintln(w)
	for i, row := range r.Rows {
		fmt.Fprintf(w, "%d. `%s`\n", i+1, row.Command)
	}
	_, err := fmt.Fprintf(w, "\nreplay: %s\n", r.Command)
	return err
}

// count writes 100000 as 100 k and 10000000 as 10 M.
func count(n int64) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%d M", n/1e6)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%d k", n/1e3)
	}
	return fmt.Sprint(n)
}
