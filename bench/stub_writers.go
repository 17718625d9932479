package bench

// Stand-ins for the writers another helper delivers (results.json/csv,
// timeline.csv, the table, plots, report.html); the lead deletes this file
// when merging them.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// WriteDir writes results.json into dir and returns the files written.
func (r *Results) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "results.json")
	return []string{path}, os.WriteFile(path, b, 0o644)
}

// WriteTable writes one line per run.
func (r *Results) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "contestant\trep\trec/s\tp50 ms\tp99 ms\tcp ms\tpts\trestore ms\treread\tcatch-up ms\trecovered ms\tok\t")
	f := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *v)
	}
	f1 := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	for _, run := range r.Runs {
		g := run.Figures
		reread := "-"
		if g.ReprocessedRecords != nil {
			reread = fmt.Sprint(*g.ReprocessedRecords)
		}
		ok := "ok"
		if run.Error != "" {
			ok = "FAILED"
		} else if !run.Correct {
			ok = "WRONG"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", run.Contestant, run.Repeat+1, f(g.ThroughputRPS),
			f1(g.LatencyP50Ms), f1(g.LatencyP99Ms), f1(g.CheckpointMs), run.PointsBeforeFault, f1(g.RestoreMs), reread,
			f(g.CatchUpMs), f(g.RecoveredMs), ok)
	}
	return tw.Flush()
}
