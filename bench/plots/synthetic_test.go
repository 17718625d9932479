package plots

import (
	"math"
	"math/rand"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// synthetic is a bench shaped like a real one: 8 s runs at 250k records/s,
// a fault at 4 s, a heartbeat timeout, a replacement, a restore and a
// catch-up of 0.3–2 s, recovery points every interval. Seeded.
type contestantShape struct {
	name                 string
	p50, p99             float64 // steady-state latency, ms
	intervalMs           float64 // between recovery points
	restoreMs, catchUpMs float64
	detectMs, acquireMs  float64
}

var benchShapes = []contestantShape{
	{"microbatch", 180, 420, 500, 250, 1400, 500, 300},
	{"diskphase", 900, 1900, 1000, 400, 2000, 500, 300},
	{"recordwise/aligned", 4, 25, 1000, 150, 600, 500, 300},
	{"recordwise/unaligned", 4, 18, 1000, 120, 300, 500, 300},
}

func f(v float64) *float64 { return &v }

func syntheticPanel(rng *rand.Rand, s contestantShape) Panel {
	const rate = 250.0 // records per ms
	const runMs, faultMs = 8000.0, 4000.0
	detected := faultMs + s.detectMs
	acquired := detected + s.acquireMs
	restored := acquired + s.restoreMs
	caught := restored + s.catchUpMs
	pn := Panel{Name: s.name, WarmupMs: 1000,
		Phases: []report.Phase{{FaultMs: faultMs, DetectedMs: f(detected), AcquiredMs: f(acquired), RestoredMs: f(restored), CaughtUpMs: f(caught)}}}
	lag := 2000.0
	for t := 0.0; t < runMs; t += report.SeriesBucketMs {
		b := report.Bucket{TMs: t, Offered: int64(rate * report.SeriesBucketMs)}
		jit := 1 + 0.2*rng.Float64()
		switch {
		case t >= faultMs && t < restored:
			lag += rate * report.SeriesBucketMs
		case t >= restored && t < caught:
			lag = math.Max(2000, lag-lag*report.SeriesBucketMs/math.Max(caught-t, report.SeriesBucketMs))
			b.Latency = &report.Latency{P50: (t - faultMs) * jit * 0.8, P99: (t - faultMs) * jit, Max: (t - faultMs) * 1.1}
		default:
			lag = 2000 * jit
			b.Latency = &report.Latency{P50: s.p50 * jit, P99: s.p99 * jit, Max: s.p99 * 2}
		}
		b.Lag = int64(lag)
		b.Processed = b.Offered
		pn.Buckets = append(pn.Buckets, b)
	}
	id := int64(0)
	for t := s.intervalMs; t < runMs; t += s.intervalMs {
		id++
		st := "completed"
		if t > faultMs && t < restored {
			continue
		}
		if id == 3 {
			st = "aborted"
		}
		pn.Events = append(pn.Events, report.SeriesEvent{TMs: t, Kind: "point", ID: id, Status: st})
	}
	return pn
}

func syntheticPanels(seed int64) []Panel {
	rng := rand.New(rand.NewSource(seed))
	var out []Panel
	for _, s := range benchShapes {
		out = append(out, syntheticPanel(rng, s))
	}
	return out
}

func syntheticBills(seed int64) []BillBar {
	rng := rand.New(rand.NewSource(seed))
	var out []BillBar
	for _, s := range benchShapes {
		reprocess := s.restoreMs * 0.6
		parts := []Part{
			{Name: "detect", Median: s.detectMs, Min: s.detectMs, Max: s.detectMs, Modelled: true},
			{Name: "acquire", Median: s.acquireMs, Min: s.acquireMs, Max: s.acquireMs, Modelled: true},
			{Name: "restore", Median: s.restoreMs * 0.4},
			{Name: "reprocess", Median: reprocess},
			{Name: "catch-up", Median: s.catchUpMs},
		}
		total := 0.0
		for _, p := range parts {
			total += p.Median
		}
		out = append(out, BillBar{Name: s.name, Parts: parts,
			Total: &Spread{Min: total * (0.85 + 0.1*rng.Float64()), Max: total * (1.05 + 0.2*rng.Float64())}})
	}
	return out
}

func syntheticPoints(seed int64) []Point {
	rng := rand.New(rand.NewSource(seed))
	var out []Point
	for _, s := range benchShapes {
		y := s.detectMs + s.acquireMs + s.restoreMs + s.catchUpMs
		out = append(out, Point{Name: s.name, X: s.p99, XMin: s.p99 * 0.9, XMax: s.p99 * (1.1 + 0.2*rng.Float64()),
			Y: y, YMin: y * 0.85, YMax: y * (1.1 + 0.2*rng.Float64())})
	}
	return out
}

// syntheticSweep is catch-up against load, with the prediction
// outage × rate / (capacity − rate) for a 1.3 s outage.
func syntheticSweep(seed int64) ([]Curve, *Curve) {
	rng := rand.New(rand.NewSource(seed))
	loads := []float64{0.5, 0.8, 0.95}
	var curves []Curve
	for i, s := range benchShapes {
		c := Curve{Name: s.name}
		for _, l := range loads {
			y := 1300 * l / (1 - l) * (0.8 + 0.1*float64(i) + 0.1*rng.Float64())
			c.Points = append(c.Points, Point{Name: "", X: l * 100, XMin: l * 100, XMax: l * 100, Y: y, YMin: y * 0.8, YMax: y * 1.25})
		}
		curves = append(curves, c)
	}
	pred := &Curve{Name: "prediction: outage × rate / (capacity − rate)"}
	for l := 0.45; l <= 0.961; l += 0.01 {
		pred.Points = append(pred.Points, Point{X: l * 100, Y: 1300 * l / (1 - l)})
	}
	return curves, pred
}
