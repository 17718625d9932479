package plots

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Bill writes NAME.svg/.png: each contestant's recovery bill as one
// horizontal bar, its parts (medians over the repeats) stacked in the
// order they happen; modelled parts are lighter, hatched and labelled so
// in the legend; the whisker on the end is the repeats' min–max total.
func Bill(dir, name string, bars []BillBar) (File, error) {
	const title = "Recovery bill: fault to recovered, median of the repeats"
	total := 0.0
	for _, b := range bars {
		total = math.Max(total, billEnd(b))
	}
	if len(bars) == 0 || total <= 0 {
		return empty(title, "no crash run has a bill").write(dir, name)
	}
	p := newPlot("", "time (ms)", "")
	var lg legendSet
	colors := map[string]int{}
	names := make([]string, len(bars))
	const h = 0.6 // bar thickness, in contestant slots
	// Contestant 0 is drawn at the top, as it is read first.
	for i, b := range bars {
		y := float64(len(bars) - 1 - i)
		names[len(bars)-1-i] = b.Name
		at := 0.0
		for _, part := range b.Parts {
			if !(part.Median > 0) || !finite(part.Median) {
				continue
			}
			ci, ok := colors[part.Name]
			if !ok {
				ci = len(colors)
				colors[part.Name] = ci
			}
			r := rect{x0: at, x1: at + part.Median, y0: y - h/2, y1: y + h/2, fill: seriesColor(ci)}
			legendName := part.Name
			if part.Modelled {
				r.fill = lighter(seriesColor(ci), 0.55)
				r.hatch = &draw.LineStyle{Color: seriesColor(ci), Width: vg.Points(0.8)}
				legendName += " (modelled)"
			}
			p.Add(r)
			lg.add(legendName, r)
			at += part.Median
		}
		end := at
		if b.Total != nil && finite(b.Total.Min, b.Total.Max) {
			w, err := whisker(b.Total.Min, b.Total.Max, y)
			if err != nil {
				return File{}, err
			}
			p.Add(w)
			lg.add("min–max of the repeats", w)
			end = math.Max(end, b.Total.Max)
		}
		sty := textStyle(9)
		sty.YAlign = draw.YCenter
		p.Add(label{end, y, fmt.Sprintf("%.0f ms", at), sty, vg.Points(4), 0})
	}
	p.NominalY(names...)
	p.X.Min, p.X.Max = 0, total*1.05
	p.Y.Min, p.Y.Max = -0.6, float64(len(bars))-0.4
	fig := &figure{title: title, panels: []*plot.Plot{p}, legend: lg.legend()}
	fig.w, fig.h = 10*vg.Inch, vg.Length(len(bars))*0.55*vg.Inch+1.4*vg.Inch
	return fig.write(dir, name)
}

// billEnd is how far a bar and its whisker reach.
func billEnd(b BillBar) float64 {
	sum := 0.0
	for _, p := range b.Parts {
		if p.Median > 0 && finite(p.Median) {
			sum += p.Median
		}
	}
	if b.Total != nil && finite(b.Total.Min, b.Total.Max) {
		sum = math.Max(sum, math.Max(b.Total.Min, b.Total.Max))
	}
	return sum
}

// spreadBar is a min–max whisker, with a legend thumbnail of its own.
type spreadBar struct{ *plotter.XErrorBars }

func (s spreadBar) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(s.LineStyle, c.Min.X, y, c.Max.X, y)
	c.StrokeLine2(s.LineStyle, c.Min.X, c.Min.Y, c.Min.X, c.Max.Y)
	c.StrokeLine2(s.LineStyle, c.Max.X, c.Min.Y, c.Max.X, c.Max.Y)
}

func whisker(lo, hi, y float64) (spreadBar, error) {
	if lo > hi {
		lo, hi = hi, lo
	}
	mid := (lo + hi) / 2
	w, err := plotter.NewXErrorBars(struct {
		plotter.XYs
		plotter.XErrors
	}{plotter.XYs{{X: mid, Y: y}}, plotter.XErrors{{Low: mid - lo, High: hi - mid}}})
	if err != nil {
		return spreadBar{}, err
	}
	w.LineStyle = draw.LineStyle{Color: colorBlack, Width: vg.Points(1.2)}
	w.CapWidth = vg.Points(10)
	return spreadBar{w}, nil
}
