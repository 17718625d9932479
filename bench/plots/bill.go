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
	// One colour per part name, in the order the parts happen, whichever
	// bar lacks one; the legend lists them in that order.
	order := partOrder(bars)
	colors := map[string]int{}
	for i, part := range order {
		colors[part.Name] = i
		lg.add(partLegend(part, i))
	}
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
			r := partRect(part, colors[part.Name])
			r.x0, r.x1, r.y0, r.y1 = at, at+part.Median, y-h/2, y+h/2
			p.Add(r)
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

// partOrder is every part name of bars once, each after the part that
// precedes it in some bar, so a bar without a part (nothing re-read)
// does not move the parts after it to another place or colour. A part
// keeps the first Modelled it was seen with.
func partOrder(bars []BillBar) []Part {
	var order []Part
	index := func(name string) int {
		for i, p := range order {
			if p.Name == name {
				return i
			}
		}
		return -1
	}
	for _, b := range bars {
		prev := -1
		for _, part := range b.Parts {
			if !(part.Median > 0) || !finite(part.Median) {
				continue
			}
			i := index(part.Name)
			if i < 0 {
				i = prev + 1
				order = append(order[:i], append([]Part{part}, order[i:]...)...)
			}
			prev = i
		}
	}
	return order
}

// partRect is part's bar segment style: its colour, lighter and hatched
// when modelled.
func partRect(part Part, ci int) rect {
	r := rect{fill: seriesColor(ci)}
	if part.Modelled {
		r.fill = lighter(seriesColor(ci), 0.55)
		r.hatch = &draw.LineStyle{Color: seriesColor(ci), Width: vg.Points(0.8)}
	}
	return r
}

// partLegend is part's legend entry.
func partLegend(part Part, ci int) (string, plot.Thumbnailer) {
	name := part.Name
	if part.Modelled {
		name += " (modelled)"
	}
	return name, partRect(part, ci)
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
