package plots

import (
	"github.com/rewind-engine/rewind/dataflow/report"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Lag writes NAME.svg/.png: per contestant, a panel of the source lag
// (records offered but not yet read) over time on shared axes, with the
// warm-up, the fault and the phases shaded: the backlog building while a
// contestant is down and draining during catch-up.
func Lag(dir, name string, panels []Panel) (File, error) {
	const title = "Source lag over time (records behind the live input, end of each 100 ms bucket)"
	if !hasBuckets(panels) {
		return empty(title, "no buckets were recorded").write(dir, name)
	}
	endS := runEndS(panels)
	hi := 1.0
	for _, pn := range panels {
		for _, b := range pn.Buckets {
			hi = max(hi, float64(b.Lag))
		}
	}
	hi *= 1.08
	var lg legendSet
	fig := panelsFigure(title, len(panels))
	for i, pn := range panels {
		p := newPlot(pn.Name, timeAxis(i, len(panels)), "lag (records)")
		decorate(p, pn, endS, &lg)
		sty := draw.LineStyle{Color: series[0], Width: vg.Points(1.4)}
		for _, r := range runs(pn, func(b report.Bucket) (float64, bool) { return float64(b.Lag), true }) {
			l, err := addLine(p, r, sty)
			if err != nil {
				return File{}, err
			}
			lg.add("source lag", l)
		}
		if len(pn.Buckets) == 0 {
			p.Add(label{endS / 2, hi / 2, "no data for this contestant", noteStyle(), 0, 0})
		}
		p.X.Min, p.X.Max = 0, endS
		p.X.Tick.Marker = secondTicks(endS)
		p.Y.Min, p.Y.Max = 0, hi
		p.Y.Tick.Marker = countTicks
		fig.panels = append(fig.panels, p)
	}
	fig.legend = lg.legendOrdered("source lag")
	return fig.write(dir, name)
}
