package plots

import (
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// pointLabels writes a name beside each point, choosing for each the first
// of a few positions around it whose text box overlaps neither an earlier
// label nor any point; a label with no free position is left out (the
// legend still names every series).
type pointLabels struct {
	xs, ys []float64
	// bars are each point's error bars (xlo, xhi, ylo, yhi): a label must
	// not cross them either.
	bars  [][4]float64
	texts []string
	sty   draw.TextStyle
}

func (l pointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	const r = vg.Length(5) // clearance around a point's glyph
	var taken []vg.Rectangle
	for i := range l.xs {
		x, y := trX(l.xs[i]), trY(l.ys[i])
		taken = append(taken, vg.Rectangle{Min: vg.Point{X: x - r, Y: y - r}, Max: vg.Point{X: x + r, Y: y + r}})
		if i < len(l.bars) {
			b := l.bars[i]
			taken = append(taken,
				vg.Rectangle{Min: vg.Point{X: trX(b[0]) - 1, Y: y - r}, Max: vg.Point{X: trX(b[1]) + 1, Y: y + r}},
				vg.Rectangle{Min: vg.Point{X: x - r, Y: trY(b[2]) - 1}, Max: vg.Point{X: x + r, Y: trY(b[3]) + 1}})
		}
	}
	for i, t := range l.texts {
		if t == "" {
			continue
		}
		x, y := trX(l.xs[i]), trY(l.ys[i])
		box := l.sty.Rectangle(t)
		w, h := box.Max.X-box.Min.X, box.Max.Y-box.Min.Y
		for _, off := range labelOffsets(w, h, r) {
			cand := vg.Rectangle{Min: vg.Point{X: x + off.X, Y: y + off.Y}, Max: vg.Point{X: x + off.X + w, Y: y + off.Y + h}}
			if !inside(cand, c.Rectangle) || overlapsAny(cand, taken) {
				continue
			}
			taken = append(taken, cand)
			sty := l.sty
			sty.XAlign, sty.YAlign = draw.XLeft, draw.YBottom
			c.FillText(sty, cand.Min, t)
			break
		}
	}
}

// labelOffsets are the lower-left corners to try, relative to the point:
// right, left, above, below, then the same further out.
func labelOffsets(w, h, r vg.Length) []vg.Point {
	var out []vg.Point
	for _, k := range []vg.Length{1, 2.5, 4} {
		d := r * k
		out = append(out,
			vg.Point{X: d, Y: -h / 2}, vg.Point{X: -d - w, Y: -h / 2},
			vg.Point{X: -w / 2, Y: d}, vg.Point{X: -w / 2, Y: -d - h},
			vg.Point{X: d, Y: d}, vg.Point{X: d, Y: -d - h},
			vg.Point{X: -d - w, Y: d}, vg.Point{X: -d - w, Y: -d - h})
	}
	return out
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

func overlapsAny(a vg.Rectangle, bs []vg.Rectangle) bool {
	for _, b := range bs {
		if overlaps(a, b) {
			return true
		}
	}
	return false
}

func inside(a, b vg.Rectangle) bool {
	return a.Min.X >= b.Min.X && a.Max.X <= b.Max.X && a.Min.Y >= b.Min.Y && a.Max.Y <= b.Max.Y
}
