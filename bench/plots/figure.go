package plots

import (
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is a column of panels sharing their axes and one legend drawn
// beside them, outside every data area, so that no legend hides data.
type figure struct {
	title  string
	panels []*plot.Plot
	legend *plot.Legend
	// note is written across the figure instead of panels when there is
	// nothing to draw.
	note string
	w, h vg.Length
}

// pngDPI makes the PNG about 1300 px wide for a 9-inch figure: enough to
// read on a screen without zooming.
const pngDPI = 144

// write renders f as dir/name.svg and dir/name.png.
func (f *figure) write(dir, name string) (File, error) {
	out := File{Name: name, Title: f.title,
		SVG: filepath.Join(dir, name+".svg"), PNG: filepath.Join(dir, name+".png")}
	svg := vgsvg.New(f.w, f.h)
	f.draw(draw.New(svg))
	if err := writeTo(out.SVG, svg); err != nil {
		return File{}, err
	}
	png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(pngDPI))}
	f.draw(draw.New(png))
	if err := writeTo(out.PNG, png); err != nil {
		return File{}, err
	}
	return out, nil
}

type writerTo interface {
	WriteTo(w interface{ Write([]byte) (int, error) }) (int64, error)
}

func writeTo(path string, c vg.CanvasWriterTo) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	if _, err := c.WriteTo(fh); err != nil {
		fh.Close()
		return fmt.Errorf("plots: writing %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	return nil
}

func (f *figure) draw(dc draw.Canvas) {
	// A white background: a PNG is transparent otherwise, and unreadable
	// in a dark viewer.
	dc.FillPolygon(colorWhite, []vg.Point{dc.Min, {X: dc.Max.X, Y: dc.Min.Y}, dc.Max, {X: dc.Min.X, Y: dc.Max.Y}})
	pad := vg.Points(8)
	dc = draw.Crop(dc, pad, -pad, pad, -pad)
	titleSty := textStyle(13)
	titleSty.XAlign = draw.XCenter
	titleH := titleSty.Height(f.title)
	dc.FillText(titleSty, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: dc.Max.Y - titleH}, f.title)
	dc = draw.Crop(dc, 0, 0, 0, -titleH-vg.Points(6))
	if f.note != "" || len(f.panels) == 0 {
		note := f.note
		if note == "" {
			note = "no data"
		}
		sty := textStyle(12)
		sty.Color = noteColor
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		dc.FillText(sty, dc.Center(), note)
		return
	}
	if f.legend != nil {
		lw := legendWidth(f.legend, dc)
		lc := draw.Crop(dc, dc.Size().X-lw, 0, 0, -vg.Points(14))
		f.legend.Top, f.legend.Left = true, true
		f.legend.Draw(lc)
		dc = draw.Crop(dc, 0, -lw-vg.Points(10), 0, 0)
	}
	rows := make([][]*plot.Plot, len(f.panels))
	for i, p := range f.panels {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: vg.Points(10)}
	cs := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(cs[i][0])
	}
}

// legendWidth is how much room the legend takes beside the panels.
func legendWidth(l *plot.Legend, dc draw.Canvas) vg.Length {
	r := l.Rectangle(dc)
	return r.Max.X - r.Min.X + vg.Points(4)
}

// newPlot is a plot with the figures' common look: readable type sizes,
// a light grid behind the data.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text, p.Y.Label.Text = x, y
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(10)
		a.Tick.Label.Font.Size = vg.Points(9)
	}
	p.Add(newGrid())
	return p
}

func newLegend() *plot.Legend {
	l := plot.NewLegend()
	l.TextStyle.Font.Size = vg.Points(10)
	l.ThumbnailWidth = vg.Points(22)
	l.Padding = vg.Points(3)
	return &l
}

func textStyle(size float64) draw.TextStyle {
	sty := draw.TextStyle{Color: colorBlack, Handler: plot.DefaultTextHandler}
	sty.Font = font.From(plot.DefaultFont, vg.Points(size))
	return sty
}

// empty returns a figure that says there is nothing to draw, and why.
func empty(title, why string) *figure {
	return &figure{title: title, note: "no data: " + why, w: 7 * vg.Inch, h: 2.5 * vg.Inch}
}
