// Command shapesplot draws the published shapes (docs/bench/shapes.md)
// from the `rewind run --summary json` lines scripts/shapes.sh collects,
// through bench's sweep figures, and prints the catch-up prediction check.
//
// It stands in for `rewind bench --sweep` until the harness fills
// bench.Results itself: it builds the Results from single runs, taking
// the steady-state figures from a crash-free run and the bill from a
// crash run of the same contestant, point and repeat.
//
//	go run ./scripts/shapesplot RUNS.jsonl OUTDIR
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/report"
)

// sweepOf is the sweep each shape of scripts/shapes.sh is: two are load
// sweeps (the catch-up one, the throttled-sink one).
var sweepOf = map[string]string{"interval": bench.SweepCadence, "load": bench.SweepLoad,
	"throttle": bench.SweepLoad, "parallelism": bench.SweepParallelism}

// line is one run as scripts/shapes.sh writes it.
type line struct {
	// Shape names the sweep (a bench.Sweep* name); Kind is calibrate,
	// steady (no fault) or crash.
	Shape, Kind, Contestant, Point string
	Repeat                         int
	Rate, CadenceMs                float64
	Summary                        report.Summary
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: shapesplot RUNS.jsonl OUTDIR")
		os.Exit(2)
	}
	if err := draw(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "shapesplot:", err)
		os.Exit(1)
	}
}

func draw(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	byShape := map[string][]line{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for n := 1; sc.Scan(); n++ {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("%s:%d: %v", in, n, err)
		}
		byShape[l.Shape] = append(byShape[l.Shape], l)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	shapes := make([]string, 0, len(byShape))
	for s := range byShape {
		shapes = append(shapes, s)
	}
	sort.Strings(shapes)
	for _, shape := range shapes {
		sweep, ok := sweepOf[shape]
		if !ok {
			return fmt.Errorf("unknown shape %q", shape)
		}
		r := results(sweep, byShape[shape])
		dir := filepath.Join(out, shape)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		files, err := r.SweepFigures(dir)
		if err != nil {
			return fmt.Errorf("%s: %v", shape, err)
		}
		for _, fl := range files {
			fmt.Printf("%s: %s\n", shape, fl.PNG)
		}
		for _, c := range r.Calibration {
			fmt.Printf("%s: capacity of %s: %.0f records/s (%.0f ms unpaced)\n", shape, c.Contestant, c.RPS, c.WallMs)
		}
		if shape == "load" {
			checkPrediction(r)
		}
	}
	return nil
}

// results assembles one sweep's Results from its lines.
func results(shape string, ls []line) *bench.Results {
	r := &bench.Results{Version: bench.ResultsVersion, Scenario: bench.Scenario{Sweep: shape}}
	type key struct {
		c, p string
		rep  int
	}
	steady, crash := map[key]line{}, map[key]line{}
	var order []key
	for _, l := range ls {
		k := key{l.Contestant, l.Point, l.Repeat}
		switch l.Kind {
		case "calibrate":
			if s := l.Summary; s.WallMs > 0 {
				r.Calibration = append(r.Calibration, bench.Capacity{Contestant: l.Contestant, RPS: float64(s.RecordsIn) / (s.WallMs / 1000), WallMs: s.WallMs})
			}
			continue
		case "steady":
			steady[k] = l
		default:
			crash[k] = l
		}
		if !slices.Contains(r.Scenario.SweepPoints, l.Point) {
			r.Scenario.SweepPoints = append(r.Scenario.SweepPoints, l.Point)
		}
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	for i, k := range order {
		base, ok := crash[k]
		if !ok {
			base = steady[k]
		}
		run := bench.RunResult{Contestant: k.c, Repeat: k.rep, Seq: i, SweepPoint: k.p, Rate: base.Rate, CadenceMs: base.CadenceMs, Correct: true}
		s := base.Summary
		run.Summary = &s
		bill(&run.Figures, &s)
		// Steady figures from the crash-free run when there is one: a
		// crash run's latency holds its recovery.
		from := base.Summary
		if st, ok := steady[k]; ok {
			from = st.Summary
		}
		if from.LatencyMs != nil {
			run.Figures.LatencyP99Ms = &from.LatencyMs.P99
		}
		run.Figures.CheckpointMs = medianPointMs(from)
		r.Runs = append(r.Runs, run)
	}
	r.Predict()
	return r
}

// bill is the first recovery's bill (the scripts kill one worker once).
func bill(f *bench.Figures, s *report.Summary) {
	if len(s.Recoveries) == 0 {
		return
	}
	rc := s.Recoveries[0]
	f.DetectMs, f.AcquireMs, f.RestoreMs, f.RestoreBytes = rc.DetectMs, rc.AcquireMs, rc.RestoreMs, rc.RestoreBytes
	f.ReprocessedRecords, f.ReprocessMs, f.CatchUpMs, f.RecoveredMs = rc.ReprocessedRecords, rc.ReprocessMs, rc.CatchUpMs, rc.RecoveredMs
	f.Modelled, f.WallMs = rc.Modelled, s.WallMs
}

// medianPointMs is the median duration of the completed recovery points
// the summary's history keeps (its newest few).
func medianPointMs(s report.Summary) *float64 {
	if s.History == nil {
		return nil
	}
	var ds []float64
	for _, evs := range s.History.Recent {
		for _, raw := range evs {
			var ev struct {
				Status     string   `json:"status"`
				DurationMs *float64 `json:"duration_ms"`
			}
			if json.Unmarshal(raw, &ev) == nil && ev.DurationMs != nil && (ev.Status == "completed" || ev.Status == "") {
				ds = append(ds, *ev.DurationMs)
			}
		}
	}
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	m := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		m = (ds[len(ds)/2-1] + ds[len(ds)/2]) / 2
	}
	return &m
}

// checkPrediction prints each load run's measured catch-up beside the
// prediction and whether it is within ±30 %.
func checkPrediction(r *bench.Results) {
	fmt.Printf("%-22s %5s %3s %9s %9s %9s %9s %6s %s\n", "contestant", "load", "rep", "rate", "outage", "predict", "catch-up", "ratio", "±30%")
	for _, run := range r.Runs {
		f := run.Figures
		if f.PredictedCatchUpMs == nil || f.CatchUpMs == nil {
			fmt.Printf("%-22s %5s %3d %9.0f   (no prediction or no catch-up measured)\n", run.Contestant, run.SweepPoint, run.Repeat, run.Rate)
			continue
		}
		ratio := *f.CatchUpMs / *f.PredictedCatchUpMs
		down := 0.0
		for _, p := range []*float64{f.DetectMs, f.AcquireMs, f.RestoreMs} {
			if p != nil {
				down += *p
			}
		}
		var reread int64
		if f.ReprocessedRecords != nil {
			reread = *f.ReprocessedRecords
		}
		outage, _ := bench.Outage(down, reread, run.Rate)
		verdict := "no"
		if ratio >= 0.7 && ratio <= 1.3 {
			verdict = "yes"
		}
		fmt.Printf("%-22s %5s %3d %9.0f %9.0f %9.0f %9.0f %6.2f %s\n", run.Contestant, run.SweepPoint, run.Repeat, run.Rate, outage, *f.PredictedCatchUpMs, *f.CatchUpMs, ratio, verdict)
	}
}
