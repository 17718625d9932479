package plots

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	colorWhite = color.NRGBA{0xff, 0xff, 0xff, 0xff}
	colorBlack = color.NRGBA{0, 0, 0, 0xff}
)

func newGrid() *plotter.Grid {
	g := plotter.NewGrid()
	g.Vertical.Color = color.NRGBA{0xdd, 0xdd, 0xdd, 0xff}
	g.Horizontal.Color = g.Vertical.Color
	return g
}

// vspan shades the full height of the data area between two times. It
// reports only its x range, so it never stretches the y axis.
type vspan struct {
	x0, x1 float64
	fill   color.Color
}

func (s vspan) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0, x1 := trX(s.x0), trX(s.x1)
	pts := []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}}
	c.FillPolygon(s.fill, c.ClipPolygonX(pts))
}

func (s vspan) DataRange() (xmin, xmax, ymin, ymax float64) {
	return s.x0, s.x1, math.NaN(), math.NaN()
}

// Thumbnail draws the span's colour as a legend entry.
func (s vspan) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(s.fill, pts)
}

// vline is a vertical line at one time across the data area.
type vline struct {
	x   float64
	sty draw.LineStyle
}

func (l vline) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x := trX(l.x)
	if !c.ContainsX(x) {
		return
	}
	c.StrokeLine2(l.sty, x, c.Min.Y, x, c.Max.Y)
}

func (l vline) DataRange() (xmin, xmax, ymin, ymax float64) {
	return l.x, l.x, math.NaN(), math.NaN()
}

func (l vline) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(l.sty, x, c.Min.Y, x, c.Max.Y)
}

// ticks marks moments (recovery points) as short strokes along the bottom
// edge of the data area, where they cross no line of data.
type ticks struct {
	xs  []float64
	sty draw.LineStyle
	h   vg.Length
}

func (t ticks) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	for _, x := range t.xs {
		vx := trX(x)
		if c.ContainsX(vx) {
			c.StrokeLine2(t.sty, vx, c.Min.Y, vx, c.Min.Y+t.h)
		}
	}
}

func (t ticks) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, x := range t.xs {
		xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
	}
	return xmin, xmax, math.NaN(), math.NaN()
}

func (t ticks) Thumbnail(c *draw.Canvas) {
	x := (c.Min.X + c.Max.X) / 2
	c.StrokeLine2(t.sty, x, c.Min.Y, x, c.Min.Y+t.h)
}

// rect is a filled rectangle in data coordinates, optionally hatched: the
// look of a modelled part of a bill.
type rect struct {
	x0, x1, y0, y1 float64
	fill           color.Color
	hatch          *draw.LineStyle
}

func (r rect) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	r.draw(&c, trX(r.x0), trX(r.x1), trY(r.y0), trY(r.y1))
}

func (r rect) draw(c *draw.Canvas, x0, x1, y0, y1 vg.Length) {
	pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
	c.FillPolygon(r.fill, c.ClipPolygonXY(pts))
	if r.hatch != nil {
		for _, seg := range hatchLines(x0, x1, y0, y1, vg.Points(5)) {
			c.StrokeLines(*r.hatch, c.ClipLinesXY(seg)...)
		}
	}
}

func (r rect) DataRange() (xmin, xmax, ymin, ymax float64) {
	return math.Min(r.x0, r.x1), math.Max(r.x0, r.x1), math.Min(r.y0, r.y1), math.Max(r.y0, r.y1)
}

func (r rect) Thumbnail(c *draw.Canvas) {
	r.draw(c, c.Min.X, c.Max.X, c.Min.Y, c.Max.Y)
}

// hatchLines are 45° strokes every step across the rectangle, each cut to
// its edges.
func hatchLines(x0, x1, y0, y1, step vg.Length) [][]vg.Point {
	if x1 < x0 {
		x0, x1 = x1, x0
	}
	if y1 < y0 {
		y0, y1 = y1, y0
	}
	var out [][]vg.Point
	// Lines y - y0 = (x - k): k runs so that every line touching the
	// rectangle is drawn.
	for k := x0 - (y1 - y0); k < x1; k += step {
		ax, ay := k, y0
		if ax < x0 {
			ax, ay = x0, y0+(x0-k)
		}
		bx, by := k+(y1-y0), y1
		if bx > x1 {
			bx, by = x1, y1-(bx-x1)
		}
		if ay > y1 || by < y0 {
			continue
		}
		out = append(out, []vg.Point{{X: ax, Y: ay}, {X: bx, Y: by}})
	}
	return out
}

// label is a piece of text at a data point, shifted by a fixed offset.
type label struct {
	x, y   float64
	text   string
	sty    draw.TextStyle
	dx, dy vg.Length
}

func (l label) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	c.FillText(l.sty, vg.Point{X: trX(l.x) + l.dx, Y: trY(l.y) + l.dy}, l.text)
}

func (l label) DataRange() (xmin, xmax, ymin, ymax float64) {
	return l.x, l.x, l.y, l.y
}

// GlyphBoxes lets the plot pad its axes so the text stays inside.
func (l label) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	r := l.sty.Rectangle(l.text)
	r.Min.X += l.dx
	r.Max.X += l.dx
	r.Min.Y += l.dy
	r.Max.Y += l.dy
	return []plot.GlyphBox{{X: p.X.Norm(l.x), Y: p.Y.Norm(l.y), Rectangle: r}}
}
