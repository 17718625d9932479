package bench

import (
	"cmp"
	"math"
	"slices"

	"github.com/rewind-engine/rewind/bench/plots"
)

// sweepFigures draws the curves of the benchmark's sweep into dir (none
// without a sweep). Each point is a contestant's median over its repeats
// at one sweep value, with the min–max as error bars; a run that failed
// is left out, and a point is drawn only when both its figures were
// measured.
//
//   - checkpoint-interval: steady p99 against time-to-recovered (the
//     trade-off the interval buys), and each of them against the interval;
//   - load: catch-up as a multiple of the outage against headroom, beside
//     the prediction load / (1 − load); the measured catch-up against the
//     predicted one; the median recovery-point duration against the load
//     (aligned against unaligned barriers, with a throttled sink);
//   - parallelism: lost-piece rebuild time against the survivors.
func (r *Results) sweepFigures(dir string) ([]plots.File, error) {
	var figs []sweepFigure
	switch r.Scenario.Sweep {
	case SweepCadence:
		figs = []sweepFigure{
			{name: "sweep-interval-tradeoff", ax: plots.Axes{Title: "Checkpoint interval: steady p99 latency against time to recovered",
				X: "steady-state p99 latency (ms)", Y: "time to recovered (ms)"}, x: sweepFig(sweepP99), y: sweepFig(sweepRecovered)},
			{name: "sweep-interval-latency", ax: plots.Axes{Title: "Checkpoint interval: steady p99 latency", LogX: true,
				X: "interval between recovery points (s)", Y: "steady-state p99 latency (ms)"}, x: r.cadenceS, y: sweepFig(sweepP99)},
			{name: "sweep-interval-recovered", ax: plots.Axes{Title: "Checkpoint interval: time to recovered", LogX: true,
				X: "interval between recovery points (s)", Y: "time to recovered (ms)"}, x: r.cadenceS, y: sweepFig(sweepRecovered)},
		}
	case SweepLoad:
		caps := Capacities(r.Calibration)
		headroom := func(run RunResult) *float64 {
			c := caps[run.Contestant]
			if !(c > 0) || !(run.Rate > 0) {
				return nil
			}
			return sweepPtr(100 * (1 - run.Rate/c))
		}
		load := func(run RunResult) *float64 {
			if h := headroom(run); h != nil {
				return sweepPtr(100 - *h)
			}
			return nil
		}
		normalised := func(run RunResult) *float64 {
			f := run.Figures
			outage, ok := f.outage(run.Rate)
			if f.CatchUpMs == nil || !ok || outage <= 0 {
				return nil
			}
			return sweepPtr(*f.CatchUpMs / outage)
		}
		figs = []sweepFigure{
			{name: "sweep-load-catchup", ax: plots.Axes{Title: "Load: catch-up against headroom, as a multiple of the outage",
				X: "headroom (% of the contestant's capacity left)", Y: "catch-up ÷ outage"}, x: headroom, y: normalised,
				prediction: headroomPrediction},
			{name: "sweep-load-predicted", ax: plots.Axes{Title: "Load: measured catch-up against the prediction outage × rate / (capacity − rate)",
				X: "predicted catch-up (ms)", Y: "measured catch-up (ms)"}, x: sweepFig(sweepPredicted), y: sweepFig(sweepCatchUp),
				prediction: identityPrediction},
			{name: "sweep-load-checkpoint", ax: plots.Axes{Title: "Load: median recovery-point duration as the load nears capacity",
				X: "load (% of the contestant's capacity)", Y: "median recovery-point duration (ms)"}, x: load, y: sweepFig(sweepCheckpoint)},
		}
	case SweepParallelism:
		figs = []sweepFigure{
			{name: "sweep-parallelism-rebuild", ax: plots.Axes{Title: "Parallelism: lost-piece rebuild time against the survivors",
				X: "surviving workers", Y: "lost-piece rebuild time (ms)"}, x: sweepSurvivors, y: sweepRebuildMs},
			{name: "sweep-parallelism-recovered", ax: plots.Axes{Title: "Parallelism: time to recovered against the survivors",
				X: "surviving workers", Y: "time to recovered (ms)"}, x: sweepSurvivors, y: sweepFig(sweepRecovered)},
		}
	default:
		return nil, nil
	}
	var out []plots.File
	for _, sf := range figs {
		curves := r.sweepCurves(sf.x, sf.y)
		var pred *plots.Curve
		if sf.prediction != nil {
			pred = sf.prediction(curves)
		}
		f, err := plots.Sweep(dir, sf.name, sf.ax, curves, pred)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// sweepFigure is one sweep plot: the figure of a run on each axis, and
// the prediction curve drawn over the points' x range (nil: none).
type sweepFigure struct {
	name       string
	ax         plots.Axes
	x, y       func(RunResult) *float64
	prediction func([]plots.Curve) *plots.Curve
}

// The Figures a sweep plot reads.
func sweepP99(f Figures) *float64        { return f.LatencyP99Ms }
func sweepRecovered(f Figures) *float64  { return f.RecoveredMs }
func sweepCatchUp(f Figures) *float64    { return f.CatchUpMs }
func sweepPredicted(f Figures) *float64  { return f.PredictedCatchUpMs }
func sweepCheckpoint(f Figures) *float64 { return f.CheckpointMs }

// figure reads one of a run's Figures.
func sweepFig(get func(Figures) *float64) func(RunResult) *float64 {
	return func(run RunResult) *float64 { return get(run.Figures) }
}

func (r *Results) cadenceS(run RunResult) *float64 {
	ms := run.CadenceMs
	if ms <= 0 {
		ms = r.Scenario.CadenceMs
	}
	if ms <= 0 {
		return nil
	}
	return sweepPtr(ms / 1000)
}

// survivors are the workers a run's crash left: its parallelism less one
// per recovery (a worker kill each).
func sweepSurvivors(run RunResult) *float64 {
	s := run.Summary
	if s == nil || s.Parallelism <= 0 || len(s.Recoveries) == 0 {
		return nil
	}
	return sweepPtr(float64(s.Parallelism - len(s.Recoveries)))
}

func sweepRebuildMs(run RunResult) *float64 {
	if run.Summary == nil || run.Summary.LostPieces == nil {
		return nil
	}
	return run.Summary.LostPieces.RebuildMs
}

// sweepCurves are one curve per contestant (in the run order), one point
// per sweep value (in the order written) with both figures measured.
func (r *Results) sweepCurves(x, y func(RunResult) *float64) []plots.Curve {
	var names []string
	for _, run := range r.Runs {
		if !slices.Contains(names, run.Contestant) {
			names = append(names, run.Contestant)
		}
	}
	labels := r.Scenario.SweepPoints
	for _, run := range r.Runs {
		if !slices.Contains(labels, run.SweepPoint) {
			labels = append(labels, run.SweepPoint)
		}
	}
	var out []plots.Curve
	for _, name := range names {
		c := plots.Curve{Name: name}
		for _, label := range labels {
			var xs, ys []float64
			for _, run := range r.Runs {
				if run.Contestant != name || run.SweepPoint != label || run.Error != "" {
					continue
				}
				if v := x(run); v != nil && sweepFinite(*v) {
					xs = append(xs, *v)
				}
				if v := y(run); v != nil && sweepFinite(*v) {
					ys = append(ys, *v)
				}
			}
			if len(xs) == 0 || len(ys) == 0 {
				continue
			}
			pt := plots.Point{Name: label}
			sx, sy := StatOf(xs), StatOf(ys)
			pt.X, pt.XMin, pt.XMax = sx.Median, sx.Min, sx.Max
			pt.Y, pt.YMin, pt.YMax = sy.Median, sy.Min, sy.Max
			c.Points = append(c.Points, pt)
		}
		slices.SortStableFunc(c.Points, func(a, b plots.Point) int { return cmp.Compare(a.X, b.X) })
		out = append(out, c)
	}
	return out
}

func sweepFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// xRange is the smallest and largest x of the curves' points.
func sweepXRange(curves []plots.Curve) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, c := range curves {
		for _, pt := range c.Points {
			lo, hi = math.Min(lo, pt.XMin), math.Max(hi, pt.XMax)
		}
	}
	return lo, hi, lo <= hi
}

// headroomPrediction is load / (1 − load) over the headroom (in %) the
// points span: where every contestant's catch-up ÷ outage should lie.
func headroomPrediction(curves []plots.Curve) *plots.Curve {
	lo, hi, ok := sweepXRange(curves)
	if !ok {
		return nil
	}
	lo, hi = math.Max(lo*0.9, 1), math.Min(hi*1.1, 99)
	if lo >= hi {
		return nil
	}
	c := &plots.Curve{Name: "prediction: load ÷ (1 − load)"}
	const steps = 40
	for i := range steps + 1 {
		h := lo + (hi-lo)*float64(i)/steps
		c.Points = append(c.Points, plots.Point{X: h, Y: predictionCurve(h / 100)})
	}
	return c
}

// identityPrediction is measured = predicted over the points' range.
func identityPrediction(curves []plots.Curve) *plots.Curve {
	lo, hi, ok := sweepXRange(curves)
	if !ok || lo >= hi {
		return nil
	}
	lo = math.Max(lo*0.8, 0)
	hi *= 1.2
	return &plots.Curve{Name: "prediction (measured = predicted)", Points: []plots.Point{{X: lo, Y: lo}, {X: hi, Y: hi}}}
}

func sweepPtr(v float64) *float64 { return &v }

// SweepFigures is sweepFigures for callers outside the package
// (scripts/shapesplot, which draws the shapes from single runs).
func (r *Results) SweepFigures(dir string) ([]plots.File, error) { return r.sweepFigures(dir) }
