package plots

import (
	"math"

	"github.com/rewind-engine/rewind/dataflow/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// phaseNames label the shaded phases of a crash, in time order.
var phaseNames = []string{
	"detect (fault → detected)",
	"acquire (→ replacement)",
	"restore (→ restored)",
	"catch-up (→ lag back to normal)",
}

const notCaughtUp = "phase cut off: not recovered by the end"

// span is one shaded phase of a crash.
type span struct {
	x0, x1 float64 // seconds
	phase  int     // index into phaseNames; -1 for a phase the run cut off
}

// phaseSpans turns a crash's boundaries into shaded spans; a boundary
// never reached (nil) ends the shading at the end of the run, marked as
// cut off, and nothing after it is drawn.
func phaseSpans(ph report.Phase, endS float64) []span {
	bounds := []*float64{ph.DetectedMs, ph.AcquiredMs, ph.RestoredMs, ph.CaughtUpMs}
	var out []span
	at := ph.FaultMs / 1000
	for i, b := range bounds {
		if b == nil {
			if endS > at {
				out = append(out, span{at, endS, -1})
			}
			return out
		}
		next := *b / 1000
		if next > at {
			out = append(out, span{at, next, i})
			at = next
		}
	}
	return out
}

// runEndS is the end of the last bucket over every panel, in seconds.
func runEndS(panels []Panel) float64 {
	end := 0.0
	for _, p := range panels {
		for _, b := range p.Buckets {
			end = math.Max(end, (b.TMs+p.bucketMs())/1000)
		}
	}
	return end
}

// decorate adds what every time panel shows behind and around its data:
// warm-up, phases, fault lines and recovery points; it fills the legend
// once (on the first call that has each entry).
func decorate(p *plot.Plot, pn Panel, endS float64, lg *legendSet) {
	if pn.WarmupMs > 0 {
		s := vspan{0, pn.WarmupMs / 1000, warmupColor}
		p.Add(s)
		lg.add("warm-up (excluded)", s)
	}
	faults := map[float64]bool{}
	for _, ph := range pn.Phases {
		for _, sp := range phaseSpans(ph, endS) {
			c := translucent(noteColor, 0x30)
			name := notCaughtUp
			if sp.phase >= 0 {
				c, name = phaseColors[sp.phase], phaseNames[sp.phase]
			}
			s := vspan{sp.x0, sp.x1, c}
			p.Add(s)
			lg.add(name, s)
		}
		faults[ph.FaultMs] = true
	}
	if pn.FaultMs > 0 {
		faults[pn.FaultMs] = true
	}
	for at := range faults {
		l := vline{at / 1000, draw.LineStyle{Color: faultColor, Width: vg.Points(1.2), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}}
		p.Add(l)
		lg.add("fault", l)
	}
	var done, other []float64
	for _, e := range pn.Events {
		switch {
		case e.Status == "":
			// Not a recovery point (a crash, a rewind): the phases show it.
		case e.Status == "completed":
			done = append(done, e.TMs/1000)
		default:
			other = append(other, e.TMs/1000)
		}
	}
	if len(done) > 0 {
		t := ticks{done, draw.LineStyle{Color: noteColor, Width: vg.Points(1)}, vg.Points(5)}
		p.Add(t)
		lg.add("recovery point", t)
	}
	if len(other) > 0 {
		t := ticks{other, draw.LineStyle{Color: series[1], Width: vg.Points(1.5)}, vg.Points(9)}
		p.Add(t)
		lg.add("recovery point failed/aborted", t)
	}
}

// legendSet collects legend entries across panels, each name once, in the
// order first seen within its group (data lines first, then markings).
type legendSet struct {
	names  []string
	thumbs map[string]plot.Thumbnailer
}

func (l *legendSet) add(name string, t plot.Thumbnailer) {
	if l.thumbs == nil {
		l.thumbs = map[string]plot.Thumbnailer{}
	}
	if _, ok := l.thumbs[name]; ok {
		return
	}
	l.names = append(l.names, name)
	l.thumbs[name] = t
}

func (l *legendSet) legend() *plot.Legend {
	if len(l.names) == 0 {
		return nil
	}
	lg := newLegend()
	for _, n := range l.names {
		lg.Add(n, l.thumbs[n])
	}
	return lg
}

// runs of consecutive buckets where v is defined: a line is broken where
// no rows became visible rather than drawn through the gap.
func runs(pn Panel, v func(report.Bucket) (float64, bool)) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, b := range pn.Buckets {
		y, ok := v(b)
		if !ok {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		// A bucket's value is drawn at its middle.
		cur = append(cur, plotter.XY{X: (b.TMs + pn.bucketMs()/2) / 1000, Y: y})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func addLine(p *plot.Plot, pts plotter.XYs, sty draw.LineStyle) (*plotter.Line, error) {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.LineStyle = sty
	p.Add(l)
	if len(pts) == 1 {
		// A lone bucket (rows made visible only at a batch or job commit)
		// is no line at all: draw it as a dot.
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: sty.Color, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Add(s)
	}
	return l, nil
}

// bucketMs is the panel's bucket width.
func (p Panel) bucketMs() float64 {
	if p.BucketMs > 0 {
		return p.BucketMs
	}
	return report.SeriesBucketMs
}

func hasBuckets(panels []Panel) bool {
	for _, p := range panels {
		if len(p.Buckets) > 0 {
			return true
		}
	}
	return false
}

// panelHeight keeps a column of many panels readable.
func panelsSize(n int) (w, h vg.Length) {
	ph := 2.1 * vg.Inch
	if n == 1 {
		ph = 3 * vg.Inch
	}
	return 10 * vg.Inch, ph*vg.Length(n) + 0.6*vg.Inch
}

// panelsFigure starts a figure of n stacked panels sharing a time axis.
func panelsFigure(title string, n int) *figure {
	fig := &figure{title: title}
	fig.w, fig.h = panelsSize(n)
	return fig
}

// timeAxis is panel i's x-axis title: only the bottom one of n says it.
func timeAxis(i, n int) string {
	if i == n-1 {
		return "time since start (s)"
	}
	return ""
}
