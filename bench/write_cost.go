package bench

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/bench/plots"
)

// WriteDir writes cost.json, cost.csv and the COST figure (cost.svg,
// cost.png) into dir and returns the files written.
func (r *CostResults) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	files := []string{filepath.Join(dir, "cost.json"), filepath.Join(dir, "cost.csv")}
	if err := os.WriteFile(files[0], append(js, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := r.writeCSV(files[1]); err != nil {
		return nil, err
	}
	jobs, series := r.plotSeries()
	f, err := plots.Cost(dir, "cost", jobs, series)
	if err != nil {
		return nil, err
	}
	return append(files, f.SVG, f.PNG), nil
}

func (r *CostResults) writeCSV(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(fh)
	_ = w.Write([]string{"job", "contestant", "parallelism", "median_rps", "vs_reference", "repeats", "wrong", "error", "workers", "vs_inproc"})
	for _, row := range r.Rows {
		_ = w.Write([]string{row.Job, row.Contestant, strconv.Itoa(row.Parallelism),
			strconv.FormatFloat(row.MedianRPS, 'f', 0, 64), strconv.FormatFloat(row.VsReference, 'f', 3, 64),
			strconv.Itoa(len(row.RPS)), strconv.Itoa(row.Wrong), row.Error, cmp.Or(row.Workers, "inproc"),
			strconv.FormatFloat(row.VsInproc, 'f', 3, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// plotSeries are the figure's bars: every contestant at every parallelism
// (the reference is the line at 1, not a bar).
func (r *CostResults) plotSeries() ([]string, []plots.CostSeries) {
	var jobs []string
	var names []string
	ratio := map[string]map[string]float64{}
	of := map[string]CostRow{}
	for _, row := range r.Rows {
		if len(jobs) == 0 || jobs[len(jobs)-1] != row.Job {
			jobs = append(jobs, row.Job)
		}
		if row.Reference {
			continue
		}
		name := fmt.Sprintf("%s ×%d", row.seatName(), row.Parallelism)
		if ratio[name] == nil {
			ratio[name] = map[string]float64{}
			names = append(names, name)
			of[name] = row
		}
		v := math.NaN()
		if row.MedianRPS > 0 && row.Error == "" {
			v = row.VsReference
		}
		ratio[name][row.Job] = v
	}
	out := make([]plots.CostSeries, len(names))
	for i, n := range names {
		out[i].Contestant, out[i].Parallelism = of[n].seatName(), of[n].Parallelism
		for _, j := range jobs {
			v, ok := ratio[n][j]
			if !ok {
				v = math.NaN()
			}
			out[i].Ratios = append(out[i].Ratios, v)
		}
	}
	return jobs, out
}

// WriteTable prints the COST table: per job the reference's throughput,
// then every contestant's at each parallelism with its ratio.
func (r *CostResults) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "COST: %d records per job, unpaced, no crash; throughput over the single-threaded reference's\n\n", r.Records)
	processes := slices.ContainsFunc(r.Rows, func(row CostRow) bool { return row.Workers != "" })
	inproc := ""
	if processes {
		inproc = "× inproc"
	}
	fmt.Fprintf(&b, "%-13s %-41s %5s %12s %8s %9s  %s\n", "job", "contestant", "par", "M records/s", "× ref", inproc, "")
	for _, row := range r.Rows {
		note := ""
		switch {
		case row.Error != "":
			note = "FAILED: " + row.Error
		case row.Wrong > 0:
			note = fmt.Sprintf("WRONG RESULT in %d of %d", row.Wrong, len(row.RPS))
		}
		ratio := fmt.Sprintf("%.2f", row.VsReference)
		if row.Reference {
			ratio = "1"
		}
		vsInproc := ""
		if row.VsInproc > 0 {
			vsInproc = fmt.Sprintf("%.2f", row.VsInproc)
		}
		fmt.Fprintf(&b, "%-13s %-41s %5d %12.2f %8s %9s  %s\n", row.Job, row.seatName(), row.Parallelism, row.MedianRPS/1e6, ratio, vsInproc, note)
	}
	fmt.Fprintf(&b, "\nreplay: %s\n", r.Command)
	_, err := io.WriteString(w, b.String())
	return err
}

// seatName is the row's contestant, marked when its workers were
// processes.
func (row CostRow) seatName() string {
	if row.Workers != "" {
		return row.Contestant + " (worker processes)"
	}
	return row.Contestant
}
