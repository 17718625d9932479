package plots

import (
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// glyphs tell contestants apart without relying on colour alone.
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{},
	draw.RingGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{},
}

// TradeOff writes NAME.svg/.png: one point per contestant at (steady-state
// latency, time to recovered) or whatever ax names, with the min–max of
// the repeats as error bars on both axes, each point named beside it and
// in the legend.
func TradeOff(dir, name string, ax Axes, points []Point) (File, error) {
	curves := make([]Curve, len(points))
	for i, pt := range points {
		curves[i] = Curve{Name: pt.Name, Points: []Point{pt}}
	}
	return drawCurves(dir, name, ax, curves, nil, true)
}

// Sweep writes NAME.svg/.png: y against x for each contestant as a line
// through its points with min–max error bars, and the prediction (if not
// nil) as a dashed line.
func Sweep(dir, name string, ax Axes, curves []Curve, prediction *Curve) (File, error) {
	return drawCurves(dir, name, ax, curves, prediction, false)
}

func drawCurves(dir, name string, ax Axes, curves []Curve, prediction *Curve, labelPoints bool) (File, error) {
	keep := func(c Curve) Curve {
		var pts []Point
		for _, pt := range c.Points {
			if finite(pt.X, pt.Y) && (!ax.LogX || pt.X > 0) && (!ax.LogY || pt.Y > 0) {
				pts = append(pts, pt)
			}
		}
		return Curve{Name: c.Name, Points: pts}
	}
	n := 0
	for i := range curves {
		curves[i] = keep(curves[i])
		n += len(curves[i].Points)
	}
	if n == 0 {
		return empty(ax.Title, "no point to draw").write(dir, name)
	}
	p := newPlot("", ax.X, ax.Y)
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks, plainTicks
	if ax.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if ax.LogY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	lg := newLegend()
	var lab pointLabels
	for i, c := range curves {
		if len(c.Points) == 0 {
			continue
		}
		col := seriesColor(i)
		xys, xerr, yerr := make(plotter.XYs, len(c.Points)), make(plotter.XErrors, len(c.Points)), make(plotter.YErrors, len(c.Points))
		for j, pt := range c.Points {
			xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
			xerr[j] = errRange{Low: spreadBelow(pt.X, pt.XMin, ax.LogX), High: math.Max(pt.XMax-pt.X, 0)}
			yerr[j] = errRange{Low: spreadBelow(pt.Y, pt.YMin, ax.LogY), High: math.Max(pt.YMax-pt.Y, 0)}
			lab.bars = append(lab.bars, [4]float64{pt.X - xerr[j].Low, pt.X + xerr[j].High, pt.Y - yerr[j].Low, pt.Y + yerr[j].High})
			lab.xs, lab.ys, lab.texts = append(lab.xs, pt.X), append(lab.ys, pt.Y), append(lab.texts, labelOf(c, pt, labelPoints))
		}
		ebSty := draw.LineStyle{Color: col, Width: vg.Points(1)}
		xe, err := plotter.NewXErrorBars(struct {
			plotter.XYs
			plotter.XErrors
		}{xys, xerr})
		if err != nil {
			return File{}, err
		}
		ye, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, yerr})
		if err != nil {
			return File{}, err
		}
		xe.LineStyle, ye.LineStyle = ebSty, ebSty
		xe.CapWidth, ye.CapWidth = vg.Points(6), vg.Points(6)
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return File{}, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(4), Shape: glyphs[i%len(glyphs)]}
		thumbs := []plot.Thumbnailer{sc}
		if len(xys) > 1 {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return File{}, err
			}
			l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.4)}
			p.Add(l)
			thumbs = append(thumbs, l)
		}
		p.Add(xe, ye, sc)
		lg.Add(c.Name, thumbs...)
	}
	if prediction != nil {
		pc := keep(*prediction)
		if len(pc.Points) > 1 {
			xys := make(plotter.XYs, len(pc.Points))
			for j, pt := range pc.Points {
				xys[j] = plotter.XY{X: pt.X, Y: pt.Y}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return File{}, err
			}
			l.LineStyle = draw.LineStyle{Color: noteColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(5), vg.Points(3)}}
			p.Add(l)
			lg.Add(pc.Name, l)
		}
	}
	lab.sty = textStyle(9)
	p.Add(lab)
	padRange(p, ax)
	fig := &figure{title: ax.Title, panels: []*plot.Plot{p}, legend: lg, w: 9 * vg.Inch, h: 5 * vg.Inch}
	return fig.write(dir, name)
}

// labelOf names a point: the contestant on a trade-off; on a sweep the
// point's own name if it has one (the legend names the curves).
func labelOf(c Curve, pt Point, byContestant bool) string {
	if byContestant {
		return c.Name
	}
	return pt.Name
}

// spreadBelow is the error bar's extent below v; on a log axis it stops
// short of 0, which the axis cannot show.
func spreadBelow(v, lo float64, log bool) float64 {
	d := math.Max(v-lo, 0)
	if log && v-d <= 0 {
		d = v * 0.9
	}
	return d
}

// padRange leaves a margin around the data so labels fit beside the
// outermost points; a linear y axis starts at 0 when the data allow, so
// heights read as ratios.
func padRange(p *plot.Plot, ax Axes) {
	pad := func(a *plot.Axis, log, fromZero bool) {
		if log {
			a.Min, a.Max = a.Min/1.6, a.Max*1.6
			return
		}
		span := a.Max - a.Min
		if span <= 0 {
			span = math.Max(math.Abs(a.Max), 1)
		}
		if fromZero && a.Min >= 0 {
			a.Min = 0
		} else {
			a.Min -= span * 0.1
		}
		a.Max += span * 0.15
	}
	pad(&p.X, ax.LogX, false)
	pad(&p.Y, ax.LogY, true)
}

func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// errRange is one entry of plotter.XErrors / YErrors.
type errRange = struct{ Low, High float64 }
