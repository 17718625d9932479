package diagram

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// drawMarks draws the glyphs of single moments: markers on their channels,
// snapshots, in-flight records, points, commits, ledger entries, the
// crash, the restore, lost and rebuilt pieces.
func (d *drawer) drawMarks() {
	c := d.c
	for _, e := range d.m.events {
		x := d.x(e.T)
		lane := d.m.laneOf(e)
		switch e.Kind {
		case spacetime.Marker:
			fi, ok1 := d.m.index[e.From]
			ti, ok2 := d.m.index[e.To]
			if !ok2 || e.To == "" {
				continue
			}
			yt := d.y(ti)
			if ok1 && e.From != "" && fi != ti {
				yf := d.y(fi)
				c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2" stroke-dasharray="3,2" marker-end="url(#head-marker)"/>`,
					x, yf, x+slant, yt-arrowGap(fi, ti), colMarker)
				// The glyph sits on the channel the marker crosses.
				diamond(c, x+slant/2, (yf+yt)/2, 4.5, colMarker, fmt.Sprintf("marker %d on %s at %s", e.ID, channelName(e), fmtMs(e.T)))
			} else {
				diamond(c, x, yt, 4.5, colMarker, fmt.Sprintf("marker %d at %s", e.ID, fmtMs(e.T)))
			}
		case spacetime.SnapshotStart:
			if lane >= 0 {
				c.raw(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="#fff" stroke="%s" stroke-width="1.5"><title>%s: snapshot for %s started at %s</title></circle>`,
					x, d.y(lane)+9, colSnap, esc(e.Lane), pointName(e.ID), fmtMs(e.T))
			}
		case spacetime.SnapshotDurable:
			if lane >= 0 {
				c.raw(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: snapshot for %s durable at %s</title></circle>`,
					x, d.y(lane)+9, colSnap, esc(e.Lane), pointName(e.ID), fmtMs(e.T))
			}
		case spacetime.InFlight:
			if lane >= 0 {
				y := d.y(lane) - 13
				c.raw(`<rect x="%.1f" y="%.1f" width="9" height="9" rx="1.5" fill="%s" stroke="#a34d00" stroke-width="0.8"><title>%d in-flight records on %s kept with %s at %s</title></rect>`,
					x-4.5, y-4.5, colFlight, e.Records, esc(e.Channel), pointName(e.ID), fmtMs(e.T))
				c.text(x+7, y+3, "start", "small", fmt.Sprintf("+%d", e.Records))
			}
		case spacetime.PointComplete, spacetime.PointFailed:
			if lane >= 0 {
				if e.Kind == spacetime.PointComplete {
					check(c, x, d.y(lane), colOK, fmt.Sprintf("%s complete at %s", pointName(e.ID), fmtMs(e.T)))
				} else {
					cross(c, x, d.y(lane), 5, 2, colBad, fmt.Sprintf("%s failed at %s: %s", pointName(e.ID), fmtMs(e.T), e.Note))
				}
			}
		case spacetime.Commit:
			if lane >= 0 {
				check(c, x, d.y(lane), colOK, fmt.Sprintf("commit %d at %s %s", e.ID, fmtMs(e.T), e.Note))
			}
		case spacetime.Ledger:
			if lane >= 0 {
				c.raw(`<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"><title>ledger entry for unit %d at %s %s</title></rect>`,
					x-3.5, d.y(lane)-3.5, colLedger, e.ID, fmtMs(e.T), esc(e.Note))
			}
		case spacetime.Crash:
			for _, l := range d.m.crashLanes(e) {
				cross(c, x, d.y(l), 8, 3, colBad, fmt.Sprintf("crash of worker %d at %s %s", e.Worker, fmtMs(e.T), e.Note))
			}
		case spacetime.Restore:
			d.drawRestore(e)
		case spacetime.PieceLost:
			lanes := []int{lane}
			if lane < 0 {
				lanes = d.m.workerLanes(e.Worker)
			}
			for _, l := range lanes {
				c.raw(`<circle cx="%.1f" cy="%.1f" r="6" fill="#fff" stroke="%s" stroke-width="2"><title>piece %d of worker %d lost at %s</title></circle>`,
					x, d.y(l), colBad, e.ID, e.Worker, fmtMs(e.T))
				c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x-4, d.y(l)+4, x+4, d.y(l)-4, colBad)
			}
		case spacetime.PieceRebuilt:
			if lane >= 0 {
				c.raw(`<rect x="%.1f" y="%.1f" width="12" height="12" rx="2" fill="%s"><title>piece %d rebuilt on %s at %s</title></rect>`,
					x-6, d.y(lane)-6, colRebuilt, e.ID, esc(e.Lane), fmtMs(e.T))
			}
		}
	}
}

// drawRestore marks the restore on the lanes that come back to life and on
// the coordinator's.
func (d *drawer) drawRestore(e spacetime.Event) {
	x := d.x(e.T)
	what := fmt.Sprintf("restore %s at %s", pointName(e.ID), fmtMs(e.T))
	lanes := []int{}
	if l := d.m.laneOf(e); l >= 0 {
		lanes = append(lanes, l)
	}
	for _, s := range d.m.spans {
		if s.kind == spanDead && s.to == e.T && !s.open {
			lanes = append(lanes, s.lane)
		}
	}
	for _, l := range lanes {
		y := d.y(l)
		d.c.raw(`<path d="M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f z" fill="%s"><title>%s</title></path>`,
			x, y-7, x+9, y, x, y+7, colOK, esc(what))
		d.c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x, y-9, x, y+9, colOK)
	}
}

func channelName(e spacetime.Event) string {
	if e.Channel != "" {
		return e.Channel
	}
	return e.From + " -> " + e.To
}

func diamond(c *canvas, x, y, r float64, col, title string) {
	c.raw(`<path d="M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f L%.1f,%.1f z" fill="%s" stroke="#fff" stroke-width="0.8"><title>%s</title></path>`,
		x, y-r, x+r, y, x, y+r, x-r, y, col, esc(title))
}

func cross(c *canvas, x, y, r, w float64, col, title string) {
	c.raw(`<g stroke="%s" stroke-width="%.1f" stroke-linecap="round"><title>%s</title><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/></g>`,
		col, w, esc(title), x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r)
}

func check(c *canvas, x, y float64, col, title string) {
	c.raw(`<path d="M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f" fill="none" stroke="%s" stroke-width="2.5" stroke-linecap="round"><title>%s</title></path>`,
		x-5, y-1, x-1, y+4, x+6, y-6, col, esc(title))
}

// drawAxis draws the time axis under the lanes in whole units and returns
// its lowest y.
func (d *drawer) drawAxis() float64 {
	c := d.c
	y := d.bottom() + 6
	c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-width="1"/>`, d.left, y, d.left+d.plotW, y)
	unit, name := time.Millisecond, "ms"
	if d.m.end >= 5*time.Second {
		unit, name = time.Second, "s"
	}
	// Round ticks first, then finer ones where the scale is zoomed and
	// their labels fit.
	coarse := niceStep(time.Duration(float64(d.m.end) * 70 / d.plotW))
	for i, step := range []time.Duration{coarse, niceStep(time.Duration(float64(coarse) / d.scale.zoom))} {
		for t := time.Duration(0); t <= d.m.end && step > 0; t += step {
			if i > 0 && !d.scale.zoomedAt(t) {
				continue
			}
			x := d.x(t)
			if c.text(x, y+17, "middle", "axis", trimFloat(float64(t)/float64(unit))) {
				c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333" stroke-width="1"/>`, x, y, x, y+5)
			}
		}
	}
	c.text(d.left+d.plotW/2, y+32, "middle", "axis", "time since the run started ("+name+")")
	return y + 36
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// legendItem is one entry of the legend: a swatch and its words.
type legendItem struct {
	kinds []string // shown when the run recorded one of these
	text  string
	draw  func(c *canvas, x, y float64)
}

var legendItems = []legendItem{
	{[]string{spacetime.Batch}, "records", func(c *canvas, x, y float64) { arrowSwatch(c, x, y, colBatch, "head") }},
	{[]string{spacetime.Batch}, "replayed records", func(c *canvas, x, y float64) { arrowSwatch(c, x, y, colReplay, "head-replay") }},
	{[]string{spacetime.Marker}, "marker on a channel", func(c *canvas, x, y float64) { diamond(c, x+8, y, 4.5, colMarker, "marker") }},
	{[]string{spacetime.BlockStart}, "blocked (alignment)", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="16" height="10" fill="url(#hatch-block)" stroke="%s" stroke-width="0.8"/>`, x, y-5, colBlock)
	}},
	{[]string{spacetime.SnapshotStart, spacetime.SnapshotDurable}, "snapshot started / durable", func(c *canvas, x, y float64) {
		c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><circle cx="%.1f" cy="%.1f" r="3.5" fill="#fff" stroke="%s" stroke-width="1.5"/><circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`,
			x+2, y, x+16, y, colSnap, x+2, y, colSnap, x+16, y, colSnap)
	}},
	{[]string{spacetime.InFlight}, "in-flight records kept", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="9" height="9" rx="1.5" fill="%s"/>`, x+4, y-4.5, colFlight)
	}},
	{[]string{spacetime.PointComplete}, "point complete", func(c *canvas, x, y float64) { check(c, x+8, y, colOK, "point complete") }},
	{[]string{spacetime.PointFailed}, "point failed", func(c *canvas, x, y float64) { cross(c, x+8, y, 5, 2, colBad, "point failed") }},
	{[]string{spacetime.Seam}, "batch seam", func(c *canvas, x, y float64) {
		c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3" stroke-opacity="0.55"/>`, x+8, y-7, x+8, y+7, colSeam)
	}},
	{[]string{spacetime.Commit}, "commit", func(c *canvas, x, y float64) { check(c, x+8, y, colOK, "commit") }},
	{[]string{spacetime.UnitStart}, "map / reduce unit", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="8" height="12" fill="%s" stroke="#555"/><rect x="%.1f" y="%.1f" width="8" height="12" fill="%s" stroke="#555"/>`,
			x, y-6, colMap, x+9, y-6, colReduce)
	}},
	{[]string{spacetime.UnitEnd}, "re-run unit", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="16" height="12" fill="url(#hatch-rerun)" stroke="%s" stroke-dasharray="4,2"/>`, x, y-6, colBad)
	}},
	{[]string{spacetime.Ledger}, "ledger entry", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="7" height="7" fill="%s"/>`, x+4.5, y-3.5, colLedger)
	}},
	{[]string{spacetime.Crash}, "crash (worker's lanes)", func(c *canvas, x, y float64) { cross(c, x+8, y, 6, 3, colBad, "crash") }},
	{[]string{spacetime.Crash}, "dead", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="16" height="12" fill="url(#hatch-dead)"/>`, x, y-6)
	}},
	{[]string{spacetime.Restore}, "restore", func(c *canvas, x, y float64) {
		c.raw(`<path d="M%.1f,%.1f L%.1f,%.1f L%.1f,%.1f z" fill="%s"/>`, x+5, y-7, x+14, y, x+5, y+7, colOK)
	}},
	{[]string{spacetime.ReplayStart}, "replay", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="16" height="12" fill="%s" fill-opacity="0.18" stroke="%s" stroke-width="0.8"/>`, x, y-6, colReplay, colReplay)
	}},
	{[]string{spacetime.PieceLost}, "piece lost", func(c *canvas, x, y float64) {
		c.raw(`<circle cx="%.1f" cy="%.1f" r="6" fill="#fff" stroke="%s" stroke-width="2"/>`, x+8, y, colBad)
	}},
	{[]string{spacetime.PieceRebuilt}, "piece rebuilt on a survivor", func(c *canvas, x, y float64) {
		c.raw(`<rect x="%.1f" y="%.1f" width="12" height="12" rx="2" fill="%s"/>`, x+2, y-6, colRebuilt)
	}},
}

func arrowSwatch(c *canvas, x, y float64, col, head string) {
	c.raw(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.2" marker-end="url(#%s)"/>`, x, y, x+15, y, col, head)
}

// drawLegend lays out an entry for every kind the run recorded, in rows
// as wide as the drawing, and returns the y below it.
func (d *drawer) drawLegend(top, width float64) float64 {
	seen := map[string]bool{}
	replayed := false
	rerun := false
	for _, e := range d.m.events {
		seen[e.Kind] = true
		replayed = replayed || e.Kind == spacetime.Batch && e.Replay
		rerun = rerun || e.Rerun
	}
	x, y := 10.0, top+legendRow/2
	items := legendItems
	if d.scale.zoom > 1 {
		items = append(items[:len(items):len(items)], legendItem{nil, fmt.Sprintf("time drawn %.0fx wider", d.scale.zoom), func(c *canvas, x, y float64) {
			c.raw(`<rect x="%.1f" y="%.1f" width="16" height="12" fill="#fff6d5" stroke="#e0d090" stroke-width="0.8"/>`, x, y-6)
		}})
	}
	for _, it := range items {
		show := it.kinds == nil
		for _, k := range it.kinds {
			show = show || seen[k]
		}
		switch it.text {
		case "replayed records":
			show = replayed
		case "re-run unit":
			show = rerun
		}
		if !show {
			continue
		}
		w := 22 + textWidth(it.text, fontSize) + 18
		if x+w > width-10 && x > 10 {
			x, y = 10, y+legendRow
		}
		it.draw(d.c, x, y)
		d.c.text(x+22, y+4, "start", "legend", it.text)
		x += w
	}
	return y + legendRow/2
}
