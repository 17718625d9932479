package plots

import (
	"math"

	"github.com/rewind-engine/rewind/dataflow/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	p50Style = draw.LineStyle{Color: series[0], Width: vg.Points(1.2)}
	p99Style = draw.LineStyle{Color: colorBlack, Width: vg.Points(1.2)}
)

// Latency writes NAME.svg/.png: per contestant, a panel of the end-to-end
// latency p50 and p99 in each bucket over time, on shared axes (log y, as
// an outage moves latency by orders of magnitude), with the warm-up, the
// fault and the phases of each crash shaded.
func Latency(dir, name string, panels []Panel) (File, error) {
	const title = "End-to-end latency over time (p50 and p99 per 100 ms bucket)"
	if !hasLatency(panels) {
		return empty(title, "no output rows became visible in any bucket").write(dir, name)
	}
	endS := runEndS(panels)
	lo, hi := latencyRange(panels)
	var lg legendSet
	fig := panelsFigure(title, len(panels))
	for i, pn := range panels {
		p := newPlot(pn.Name, timeAxis(i, len(panels)), "latency (ms, log)")
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		decorate(p, pn, endS, &lg)
		// Catch-up and steady state differ by orders of magnitude; a log
		// axis cannot show 0, so a bucket at 0 ms is drawn at the floor.
		val := func(pick func(*report.Latency) float64) func(report.Bucket) (float64, bool) {
			return func(b report.Bucket) (float64, bool) {
				if b.Latency == nil {
					return 0, false
				}
				return math.Max(pick(b.Latency), lo), true
			}
		}
		for _, r := range runs(pn, val(func(l *report.Latency) float64 { return l.P99 })) {
			l, err := addLine(p, r, p99Style)
			if err != nil {
				return File{}, err
			}
			lg.add("p99", l)
		}
		for _, r := range runs(pn, val(func(l *report.Latency) float64 { return l.P50 })) {
			l, err := addLine(p, r, p50Style)
			if err != nil {
				return File{}, err
			}
			lg.add("p50", l)
		}
		if len(pn.Buckets) == 0 {
			p.Add(label{endS / 2, math.Sqrt(lo * hi), "no data for this contestant", noteStyle(), 0, 0})
		}
		p.X.Min, p.X.Max = 0, endS
		p.X.Tick.Marker = secondTicks(endS)
		p.Y.Min, p.Y.Max = lo, hi
		fig.panels = append(fig.panels, p)
	}
	fig.legend = lg.legendOrdered("p50", "p99")
	return fig.write(dir, name)
}

func hasLatency(panels []Panel) bool {
	for _, p := range panels {
		for _, b := range p.Buckets {
			if b.Latency != nil && (finite(b.Latency.P50) || finite(b.Latency.P99)) {
				return true
			}
		}
	}
	return false
}

// latencyRange is the shared y range: from a little under the smallest
// positive p50 to a little over the largest p99.
func latencyRange(panels []Panel) (lo, hi float64) {
	lo, hi = math.Inf(1), 0.0
	for _, p := range panels {
		for _, b := range p.Buckets {
			if b.Latency == nil {
				continue
			}
			for _, v := range []float64{b.Latency.P50, b.Latency.P99} {
				if !finite(v) {
					continue
				}
				if v > 0 {
					lo = math.Min(lo, v)
				}
				hi = math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) || hi <= 0 {
		return 0.1, 1
	}
	lo, hi = lo/1.5, hi*1.5
	if hi/lo < 10 {
		// A flat run still gets a decade, so the ticks say what scale it is.
		mid := math.Sqrt(lo * hi)
		lo, hi = mid/math.Sqrt(10), mid*math.Sqrt(10)
	}
	return lo, hi
}

func noteStyle() draw.TextStyle {
	sty := textStyle(10)
	sty.Color = noteColor
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	return sty
}

// legendOrdered puts the named entries first (the data), then the rest
// (the markings) in the order they were first seen.
func (l *legendSet) legendOrdered(first ...string) *plot.Legend {
	var names []string
	seen := map[string]bool{}
	for _, n := range first {
		if _, ok := l.thumbs[n]; ok {
			names = append(names, n)
			seen[n] = true
		}
	}
	for _, n := range l.names {
		if !seen[n] {
			names = append(names, n)
		}
	}
	l.names = names
	return l.legend()
}
