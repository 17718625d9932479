package diagram

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// SVGOptions shape the SVG.
type SVGOptions struct {
	// Title heads the drawing.
	Title string
	// PlotWidth is the width of the time axis in pixels (0: 900).
	PlotWidth float64
	// MaxArrows: a run with more batches than this draws them aggregated,
	// one arrow per channel and few pixels of time (0: 300).
	MaxArrows int
}

// Layout, in pixels.
const (
	laneH     = 42.0
	bandRowH  = 14.0
	titleH    = 30.0
	rightPad  = 28.0
	slant     = 6.0 // an arrow leans right, so its direction reads
	legendRow = 18.0
)

// Colours, one per meaning, shared with the legend.
const (
	colBatch   = "#4a6fa5"
	colReplay  = "#d95f02"
	colMarker  = "#7b3294"
	colBlock   = "#e6ab02"
	colSnap    = "#1f78b4"
	colFlight  = "#ff7f00"
	colOK      = "#1b9e45"
	colBad     = "#d7191c"
	colSeam    = "#555555"
	colMap     = "#a6cee3"
	colReduce  = "#b2df8a"
	colLedger  = "#1b9e77"
	colDead    = "#bbbbbb"
	colRebuilt = "#33a02c"
)

// SVG writes rec as a self-contained SVG: lanes labelled on the left, time
// left to right with an axis in units, a legend, and a label for every
// moment that has one, none over another.
func SVG(w io.Writer, rec Recording, o SVGOptions) error {
	_, err := io.WriteString(w, renderSVG(rec, o).doc)
	return err
}

type svgDoc struct {
	c             *canvas
	width, height float64
	doc           string
}

type drawer struct {
	m       *model
	c       *canvas
	o       SVGOptions
	left    float64
	plotW   float64
	laneTop float64
	scale   *timeScale
}

func (d *drawer) x(t time.Duration) float64 {
	return d.left + d.scale.at(t)*d.plotW
}

func (d *drawer) y(lane int) float64 { return d.laneTop + float64(lane)*laneH + laneH/2 }

func (d *drawer) top() float64    { return d.laneTop }
func (d *drawer) bottom() float64 { return d.laneTop + float64(len(d.m.lanes))*laneH }

// annot is a label in the band above the lanes, tied to a moment.
type annot struct {
	t      time.Duration
	text   string
	title  string
	colour string
}

func renderSVG(rec Recording, o SVGOptions) svgDoc {
	if o.PlotWidth <= 0 {
		o.PlotWidth = 900
	}
	if o.MaxArrows <= 0 {
		o.MaxArrows = 300
	}
	m := newModel(rec)
	d := &drawer{m: m, c: &canvas{}, o: o, plotW: o.PlotWidth, scale: newTimeScale(m)}
	labelW := 0.0
	for _, l := range m.lanes {
		labelW = max(labelW, textWidth(svgLaneLabel(l), fontSize))
	}
	d.left = labelW + 20

	// The band: every labelled moment, packed into as few rows as keep
	// the labels apart.
	annots := d.annotations()
	band := rows{gap: 6}
	rowOf := make([]int, len(annots))
	for i, a := range annots {
		x0, x1 := d.bandSpan(a)
		rowOf[i] = band.place(x0, x1)
	}
	d.laneTop = titleH + float64(len(band.used))*bandRowH + 14
	width := d.left + d.plotW + rightPad

	c := d.c
	if o.Title != "" {
		c.text(10, 20, "start", "title", o.Title)
	}
	d.drawLanesBackground()
	d.drawSpans()
	d.drawLaneLines()
	d.drawVerticals()
	d.drawBatches()
	d.drawMarks()
	// Labels after the shapes, so they read on top of them.
	for i, a := range annots {
		x0, x1 := d.bandSpan(a)
		y := titleH + float64(rowOf[i])*bandRowH + 10
		c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="0.6" stroke-dasharray="1,2"/>`,
			d.x(a.t), y+3, d.x(a.t), d.top(), a.colour)
		c.raw(`<g><title>%s</title>`, esc(a.title))
		c.text((x0+x1)/2, y, "middle", "band", a.text)
		c.raw(`</g>`)
	}
	for i, l := range m.lanes {
		c.text(d.left-10, d.y(i)+4, "end", "lane", svgLaneLabel(l))
	}
	axisBottom := d.drawAxis()
	height := d.drawLegend(axisBottom+16, width) + 10

	var doc strings.Builder
	fmt.Fprintf(&doc, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">`+"\n", width, height, width, height)
	doc.WriteString(svgDefs)
	fmt.Fprintf(&doc, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	doc.WriteString(c.b.String())
	doc.WriteString("</svg>\n")
	return svgDoc{c: c, width: width, height: height, doc: doc.String()}
}

// svgDefs: the style, arrow heads and hatches, all inline so the file
// needs nothing else.
const svgDefs = `<style>
text { font-family: 'DejaVu Sans Mono', Menlo, Consolas, monospace; font-size: 11px; fill: #222; }
text.small { font-size: 9px; fill: #444; }
text.title { font-size: 14px; font-weight: bold; }
text.band { fill: #222; }
</style>
<defs>
<marker id="head" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="` + colBatch + `"/></marker>
<marker id="head-replay" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="` + colReplay + `"/></marker>
<marker id="head-marker" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="` + colMarker + `"/></marker>
<pattern id="hatch-block" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="` + colBlock + `" fill-opacity="0.25"/><line x1="0" y1="0" x2="0" y2="6" stroke="` + colBlock + `" stroke-width="2"/></pattern>
<pattern id="hatch-rerun" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#fbb4ae"/><line x1="0" y1="0" x2="0" y2="6" stroke="` + colBad + `" stroke-width="1"/></pattern>
<pattern id="hatch-dead" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="8" height="8" fill="#f0f0f0"/><line x1="0" y1="0" x2="0" y2="8" stroke="` + colDead + `" stroke-width="1"/></pattern>
</defs>
`

func svgLaneLabel(l spacetime.Lane) string {
	if l.Worker < 0 || l.Kind == "coordinator" {
		return laneLabel(l)
	}
	return laneLabel(l) + " w" + strconv.Itoa(l.Worker)
}

// bandSpan is where an annotation's label lies, kept inside the plot.
func (d *drawer) bandSpan(a annot) (float64, float64) {
	w := textWidth(a.text, fontSize)
	x0 := d.x(a.t) - w/2
	x0 = max(x0, d.left-20)
	x0 = min(x0, d.left+d.plotW+rightPad-4-w)
	return x0, x0 + w
}

// annotations are the moments labelled in the band.
func (d *drawer) annotations() []annot {
	var out []annot
	for _, e := range d.m.events {
		a := annot{t: e.T, colour: colSeam}
		id := strconv.FormatInt(e.ID, 10)
		switch e.Kind {
		case spacetime.PointComplete:
			a.text, a.colour = pointName(e.ID)+" complete", colOK
		case spacetime.PointFailed:
			a.text, a.colour = pointName(e.ID)+" failed", colBad
		case spacetime.Seam:
			a.text = "batch " + id
		case spacetime.Commit:
			a.text, a.colour = "commit "+id, colOK
		case spacetime.Crash:
			a.text, a.colour = "crash w"+strconv.Itoa(e.Worker), colBad
			if e.Worker < 0 {
				a.text = "crash: coordinator"
			}
		case spacetime.Restore:
			a.text, a.colour = "restore "+pointName(e.ID), colOK
		case spacetime.PieceLost:
			a.text, a.colour = "piece "+id+" lost", colBad
		case spacetime.PieceRebuilt:
			a.text, a.colour = "piece "+id+" rebuilt", colRebuilt
		default:
			continue
		}
		a.title = fmt.Sprintf("%s at %s", a.text, fmtMs(e.T))
		if e.Note != "" {
			a.title += ": " + e.Note
		}
		out = append(out, a)
	}
	return out
}

func fmtMs(t time.Duration) string {
	return strconv.FormatFloat(float64(t)/float64(time.Millisecond), 'f', 1, 64) + " ms"
}

func (d *drawer) drawLanesBackground() {
	for _, z := range d.scale.zones() {
		d.c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff6d5"/>`,
			d.x(z[0]), d.top(), d.x(z[1])-d.x(z[0]), d.bottom()-d.top()+6)
	}
	for i := range d.m.lanes {
		if i%2 == 1 {
			d.c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#6060a0" fill-opacity="0.05"/>`,
				d.left, d.top()+float64(i)*laneH, d.plotW, laneH)
		}
	}
}

// drawSpans draws the intervals: dead time, replay, blocking, units,
// snapshots.
func (d *drawer) drawSpans() {
	c := d.c
	for _, s := range d.m.spans {
		x0, x1 := d.x(s.from), d.x(s.to)
		w := max(x1-x0, 1.5)
		y := d.y(s.lane)
		switch s.kind {
		case spanDead:
			c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#hatch-dead)"><title>%s dead from %s to %s</title></rect>`,
				x0, y-laneH/2+2, w, laneH-4, esc(laneLabel(d.m.lanes[s.lane])), fmtMs(s.from), fmtMs(s.to))
		case spanReplay:
			c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.18" stroke="%s" stroke-width="0.8"><title>replay from %s to %s</title></rect>`,
				x0, y-laneH/2+3, w, laneH-6, colReplay, colReplay, fmtMs(s.from), fmtMs(s.to))
			d.inner(x0, x1, y-laneH/2+12, "replay")
		case spanBlock:
			c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="14" fill="url(#hatch-block)" stroke="%s" stroke-width="0.8"><title>blocked on %s from %s for %s</title></rect>`,
				x0, y-7, w, colBlock, esc(s.ev.Channel), fmtMs(s.from), fmtMs(s.to-s.from))
		case spanUnit:
			fill, label := colMap, "unit "+strconv.FormatInt(s.ev.ID, 10)
			switch phase(s.ev.Note) {
			case "map":
				label = "map " + strconv.FormatInt(s.ev.ID, 10)
			case "reduce":
				fill, label = colReduce, "reduce "+strconv.FormatInt(s.ev.ID, 10)
			}
			stroke, dash := "#555", ""
			if s.ev.Rerun {
				fill, stroke, dash, label = "url(#hatch-rerun)", colBad, ` stroke-dasharray="4,2"`, "re-run "+label
			}
			c.raw(`<rect x="%.1f" y="%.1f" width="%.1f" height="24" rx="2" fill="%s" stroke="%s" stroke-width="1.2"%s><title>%s from %s to %s %s</title></rect>`,
				x0, y-12, w, fill, stroke, dash, esc(label), fmtMs(s.from), fmtMs(s.to), esc(s.ev.Note))
			d.inner(x0, x1, y+4, label)
		case spanSnapshot:
			c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x0, y+9, x1, y+9, colSnap)
		}
	}
}

// inner labels a box from inside when the label fits in it.
func (d *drawer) inner(x0, x1, y float64, s string) {
	if textWidth(s, fontSize-2)+6 <= x1-x0 {
		d.c.text((x0+x1)/2, y, "middle", "small", s)
	}
}

// drawLaneLines draws each lane's line where the lane is alive.
func (d *drawer) drawLaneLines() {
	for i := range d.m.lanes {
		from := time.Duration(0)
		y := d.y(i)
		for _, s := range d.m.spans {
			if s.kind != spanDead || s.lane != i {
				continue
			}
			d.c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-width="1"/>`, d.x(from), y, d.x(s.from), y)
			from = s.to
		}
		if from < d.m.end {
			d.c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-width="1"/>`, d.x(from), y, d.x(d.m.end), y)
		}
	}
}

// drawVerticals draws what concerns every lane at one moment: seams and
// recovery points.
func (d *drawer) drawVerticals() {
	for _, e := range d.m.events {
		x := d.x(e.T)
		switch e.Kind {
		case spacetime.Seam:
			d.c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3" stroke-opacity="0.55"><title>batch %d seam, offsets logged: %s</title></line>`,
				x, d.top(), x, d.bottom(), colSeam, e.ID, esc(e.Note))
		case spacetime.PointComplete, spacetime.PointFailed:
			col := colOK
			if e.Kind == spacetime.PointFailed {
				col = colBad
			}
			d.c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1" stroke-dasharray="5,3"/>`,
				x, d.top(), x, d.bottom(), col)
		}
	}
}

// drawBatches draws record batches as arrows, every one for a small run,
// else one per channel and bucket of time, thicker for more records.
func (d *drawer) drawBatches() {
	var batches []spacetime.Event
	for _, e := range d.m.events {
		if e.Kind == spacetime.Batch {
			batches = append(batches, e)
		}
	}
	type key struct {
		from, to string
		replay   bool
		bucket   int
	}
	type agg struct {
		t       time.Duration
		n       int
		records int64
	}
	aggregate := len(batches) > d.o.MaxArrows
	groups := map[key]*agg{}
	var order []key
	for _, e := range batches {
		k := key{e.From, e.To, e.Replay, 0}
		if aggregate {
			k.bucket = int((d.x(e.T) - d.left) / 8)
		} else {
			k.bucket = len(order)
		}
		g, ok := groups[k]
		if !ok {
			g = &agg{t: e.T}
			groups[k] = g
			order = append(order, k)
		}
		g.n++
		g.records += e.Records
	}
	for _, k := range order {
		g := groups[k]
		fi, ok1 := d.m.index[k.from]
		ti, ok2 := d.m.index[k.to]
		if !ok1 || !ok2 || fi == ti || k.from == "" || k.to == "" {
			continue
		}
		col, head := colBatch, "head"
		if k.replay {
			col, head = colReplay, "head-replay"
		}
		width, opacity := 1.0, 0.8
		what := fmt.Sprintf("%d records %s -> %s at %s", g.records, k.from, k.to, fmtMs(g.t))
		if aggregate {
			width, opacity = 1+math.Log2(float64(g.n)), 0.45
			what = fmt.Sprintf("%d batches, %d records %s -> %s from %s", g.n, g.records, k.from, k.to, fmtMs(g.t))
		}
		if k.replay {
			what = "replayed: " + what
		}
		x := d.x(g.t)
		d.c.raw(`<line class="batch" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f" marker-end="url(#%s)"><title>%s</title></line>`,
			x, d.y(fi), x+slant, d.y(ti)-arrowGap(fi, ti), col, width, opacity, head, esc(what))
	}
}

// arrowGap stops an arrow short of its lane, so its head sits on it.
func arrowGap(from, to int) float64 {
	if to > from {
		return 2
	}
	return -2
}
