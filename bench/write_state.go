package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/rewind-engine/rewind/bench/plots"
)

// WriteDir writes state.json and two figures into dir (state-restore:
// restore time against the bytes restored; state-rss: peak RSS against
// keys; both log-log, a line per job and contestant) and returns the
// files written.
func (r *StateResults) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	f := filepath.Join(dir, "state.json")
	if err := os.WriteFile(f, append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	files := []string{f}
	restore := r.curves(func(row StateRow) (float64, float64) { return float64(row.RestoreBytes) / 1e6, row.RestoreMs })
	fig, err := plots.Sweep(dir, "state-restore", plots.Axes{Title: "Restore time against state restored",
		X: "bytes restored (MB)", Y: "restore (ms)", LogX: true, LogY: true}, restore, nil)
	if err != nil {
		return nil, err
	}
	files = append(files, fig.SVG, fig.PNG)
	rss := r.curves(func(row StateRow) (float64, float64) { return float64(row.Keys), float64(row.MaxRSSBytes) / 1e6 })
	if fig, err = plots.Sweep(dir, "state-rss", plots.Axes{Title: "Peak RSS against keys",
		X: "keys", Y: "peak RSS (MB)", LogX: true, LogY: true}, rss, nil); err != nil {
		return nil, err
	}
	return append(files, fig.SVG, fig.PNG), nil
}

// curves are one line per job and contestant, in the order of the rows,
// through xy of each successful row (sorted by x).
func (r *StateResults) curves(xy func(StateRow) (float64, float64)) []plots.Curve {
	var out []plots.Curve
	at := map[string]int{}
	for _, row := range r.Rows {
		if row.Error != "" {
			continue
		}
		name := row.Job + " " + row.Contestant
		i, ok := at[name]
		if !ok {
			i, at[name] = len(out), len(out)
			out = append(out, plots.Curve{Name: name})
		}
		x, y := xy(row)
		out[i].Points = append(out[i].Points, plots.Point{X: x, XMin: x, XMax: x, Y: y, YMin: y, YMax: y})
	}
	for i := range out {
		slices.SortFunc(out[i].Points, func(a, b plots.Point) int { return cmp.Compare(a.X, b.X) })
	}
	return out
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
