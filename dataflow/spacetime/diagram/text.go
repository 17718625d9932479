package diagram

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// TextOptions shape the text view.
type TextOptions struct {
	// Width is the widest line in columns (0: 80). Time is folded into the
	// columns left of the labels; no line is ever longer.
	Width int
	// Colour adds ANSI colours, for a colour terminal only.
	Colour bool
}

func (o TextOptions) width() int {
	if o.Width <= 0 {
		return 80
	}
	return max(o.Width, 40)
}

// glyph is one cell kind of the text view. A cell shows the glyph of the
// highest priority among what happened on its lane in its column.
type glyph struct {
	ch     byte
	prio   int
	legend string
	colour string // ANSI SGR parameters
}

var (
	gDead      = glyph{' ', 0, "", ""}
	gIdle      = glyph{'.', 1, "alive", "2"}
	gReplay    = glyph{'~', 2, "replaying", "36"}
	gBlock     = glyph{'#', 5, "blocked (alignment)", "33;1"}
	gBatch     = glyph{'-', 3, "records moved", ""}
	gReBatch   = glyph{'=', 4, "replayed records", "36;1"}
	gSeam      = glyph{'|', 6, "batch seam", "1"}
	gMap       = glyph{'m', 7, "map unit", "34"}
	gReduce    = glyph{'r', 7, "reduce unit", "32"}
	gUnit      = glyph{'u', 7, "unit", "34"}
	gRerun     = glyph{'R', 8, "re-run unit", "31;1"}
	gCommit    = glyph{'c', 9, "commit", "32;1"}
	gLedger    = glyph{'L', 9, "ledger entry", "36"}
	gMarker    = glyph{'>', 11, "marker", "35;1"}
	gSnapStart = glyph{'s', 10, "snapshot started", "34"}
	gSnapDone  = glyph{'S', 12, "snapshot durable", "34;1"}
	gInFlight  = glyph{'i', 13, "in-flight records kept", "33;1"}
	gRebuilt   = glyph{'B', 14, "piece rebuilt", "32;1"}
	gLost      = glyph{'x', 15, "piece lost", "31"}
	gComplete  = glyph{'C', 16, "point complete", "32;1"}
	gFailed    = glyph{'F', 17, "point failed", "31;1"}
	gRestore   = glyph{'@', 18, "restore", "32;1"}
	gCrash     = glyph{'X', 19, "crash", "31;1"}
)

// legendOrder is the order the legend lists the glyphs a view used.
var legendOrder = []glyph{gIdle, gBatch, gReBatch, gMarker, gBlock, gSnapStart, gSnapDone, gInFlight,
	gComplete, gFailed, gSeam, gCommit, gMap, gReduce, gUnit, gRerun, gLedger, gCrash, gRestore, gReplay, gLost, gRebuilt}

// Text writes the lanes of rec folded to fit o's width: a time axis, one
// row per lane, and a legend of the glyphs used.
func Text(w io.Writer, rec Recording, o TextOptions) error {
	m := newModel(rec)
	width := o.width()
	labelW := 6
	for _, l := range m.lanes {
		labelW = max(labelW, utf8.RuneCountInString(laneLabel(l)))
	}
	labelW = min(labelW, 16)
	cols := width - labelW - 1
	f := fold(m, cols)
	ncols := len(f.starts)
	col := f.col

	grid := make([][]glyph, len(m.lanes))
	for i := range grid {
		grid[i] = make([]glyph, ncols)
		for c := range grid[i] {
			grid[i][c] = gIdle
		}
	}
	put := func(l, c int, g glyph) {
		if l >= 0 && l < len(grid) && c >= 0 && c < ncols && g.prio > grid[l][c].prio {
			grid[l][c] = g
		}
	}
	for _, s := range m.spans {
		if s.kind == spanDead {
			// Dead cells are blank: put cannot lower a priority.
			for c := col(s.from) + 1; c < col(s.to); c++ {
				grid[s.lane][c] = gDead
			}
			continue
		}
		g, ok := spanGlyph(s)
		if !ok {
			continue
		}
		for c := col(s.from); c <= col(s.to); c++ {
			if grid[s.lane][c] != gDead {
				put(s.lane, c, g)
			}
		}
	}
	used := map[byte]bool{}
	for _, e := range m.events {
		c := col(e.T)
		for _, p := range m.marks(e) {
			if grid[p.lane][c] == gDead && p.g != gCrash && p.g != gRestore {
				continue
			}
			put(p.lane, c, p.g)
		}
	}
	var b strings.Builder
	writeAxis(&b, labelW, f)
	for i, l := range m.lanes {
		fmt.Fprintf(&b, "%-*s ", labelW, clipRunes(laneLabel(l), labelW))
		for _, g := range grid[i] {
			used[g.ch] = true
		}
		writeCells(&b, grid[i], o.Colour)
		b.WriteString("\n")
	}
	writeLegend(&b, used, width, f, o.Colour)
	_, err := io.WriteString(w, b.String())
	return err
}

// spanGlyph is the fill of an interval, if it has one.
func spanGlyph(s span) (glyph, bool) {
	switch s.kind {
	case spanBlock:
		return gBlock, true
	case spanReplay:
		return gReplay, true
	case spanUnit:
		if s.ev.Rerun {
			return gRerun, true
		}
		switch phase(s.ev.Note) {
		case "map":
			return gMap, true
		case "reduce":
			return gReduce, true
		}
		return gUnit, true
	}
	return glyph{}, false
}

// phase is the disk phase a unit's note names.
func phase(note string) string {
	n := strings.ToLower(note)
	switch {
	case strings.HasPrefix(n, "map"):
		return "map"
	case strings.HasPrefix(n, "reduce"):
		return "reduce"
	}
	return ""
}

type mark struct {
	lane int
	g    glyph
}

// laneGlyph is the glyph of the events that mark their own lane's cell
// and nothing else.
var laneGlyph = map[string]glyph{
	spacetime.SnapshotStart: gSnapStart, spacetime.SnapshotDurable: gSnapDone, spacetime.InFlight: gInFlight,
	spacetime.PointComplete: gComplete, spacetime.PointFailed: gFailed, spacetime.Commit: gCommit,
	spacetime.Ledger: gLedger, spacetime.PieceRebuilt: gRebuilt,
}

// marks are the cells one event marks.
func (m *model) marks(e spacetime.Event) []mark {
	lane := m.laneOf(e)
	one := func(g glyph) []mark {
		if lane < 0 {
			return nil
		}
		return []mark{{lane, g}}
	}
	if g, ok := laneGlyph[e.Kind]; ok {
		return one(g)
	}
	switch e.Kind {
	case spacetime.Batch:
		g := gBatch
		if e.Replay {
			g = gReBatch
		}
		var out []mark
		for _, id := range []string{e.From, e.To} {
			if i, ok := m.index[id]; ok && id != "" {
				out = append(out, mark{i, g})
			}
		}
		return out
	case spacetime.Marker:
		if i, ok := m.index[e.To]; ok && e.To != "" {
			return []mark{{i, gMarker}}
		}
		return one(gMarker)
	case spacetime.Seam:
		out := make([]mark, len(m.lanes))
		for i := range m.lanes {
			out[i] = mark{i, gSeam}
		}
		return out
	case spacetime.Crash:
		var out []mark
		for _, l := range m.crashLanes(e) {
			out = append(out, mark{l, gCrash})
		}
		return out
	case spacetime.PieceLost:
		if lane >= 0 {
			return one(gLost)
		}
		var out []mark
		for _, l := range m.workerLanes(e.Worker) {
			out = append(out, mark{l, gLost})
		}
		return out
	case spacetime.Restore:
		out := one(gRestore)
		for _, s := range m.spans {
			if s.kind == spanDead && s.to == e.T && !s.open {
				out = append(out, mark{s.lane, gRestore})
			}
		}
		return out
	}
	return nil
}

func laneLabel(l spacetime.Lane) string {
	if l.Label != "" {
		return l.Label
	}
	return l.ID
}

// clipRunes cuts s to n runes, keeping its end (a subtask's number) and
// marking the cut with '~'.
func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 1) / 2
	return string(r[:head]) + "~" + string(r[len(r)-(n-1-head):])
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten microseconds.
func niceStep(d time.Duration) time.Duration {
	step := time.Microsecond
	for {
		for _, f := range []time.Duration{1, 2, 5} {
			if f*step >= d {
				return f * step
			}
		}
		step *= 10
	}
}

// fmtDur writes a time for an axis: whole units where they are whole.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	case d >= time.Millisecond && d%time.Millisecond == 0:
		return fmt.Sprintf("%dms", d/time.Millisecond)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%dus", d/time.Microsecond)
}

// writeAxis writes the tick labels and the ruler: a tick every ten
// columns, labelled where the label fits before the next one.
func writeAxis(b *strings.Builder, labelW int, f folding) {
	ncols := len(f.starts)
	labels := []byte(strings.Repeat(" ", ncols))
	ruler := []byte(strings.Repeat("-", ncols))
	for c, folded := range f.folded {
		if folded {
			ruler[c] = '/'
		}
	}
	for c := 0; c < ncols; c += 10 {
		for c < ncols && f.folded[c] {
			c++ // a tick on a fold would name no one moment
		}
		if c >= ncols {
			break
		}
		ruler[c] = '+'
		text := fmtDur(f.starts[c])
		if c+len(text) <= ncols {
			copy(labels[c:], text)
		}
	}
	fmt.Fprintf(b, "%-*s %s\n", labelW, "time", strings.TrimRight(string(labels), " "))
	fmt.Fprintf(b, "%-*s %s\n", labelW, "", ruler)
}

func writeCells(b *strings.Builder, cells []glyph, colour bool) {
	for i := 0; i < len(cells); {
		j := i
		for j < len(cells) && cells[j] == cells[i] {
			j++
		}
		run := strings.Repeat(string(cells[i].ch), j-i)
		if colour && cells[i].colour != "" {
			fmt.Fprintf(b, "\x1b[%sm%s\x1b[0m", cells[i].colour, run)
		} else {
			b.WriteString(run)
		}
		i = j
	}
}

// writeLegend lists the glyphs used, as many to a line as fit.
func writeLegend(b *strings.Builder, used map[byte]bool, width int, f folding, colour bool) {
	items := []string{"1 column = " + fmtDur(f.step)}
	if slices.Contains(f.folded, true) {
		items[0] += ", / quiet time folded"
	}
	var shown []glyph
	for _, g := range legendOrder {
		if used[g.ch] && !containsCh(shown, g.ch) {
			shown = append(shown, g)
		}
	}
	if used[' '] {
		items = append(items, "blank dead")
	}
	for _, g := range shown {
		items = append(items, string(g.ch)+" "+g.legend)
	}
	line := ""
	for _, it := range items {
		if line != "" && len(line)+2+len(it) > width {
			b.WriteString(paintLegend(line, colour) + "\n")
			line = ""
		}
		if line != "" {
			line += "  "
		}
		line += it
	}
	if line != "" {
		b.WriteString(paintLegend(line, colour) + "\n")
	}
}

func containsCh(gs []glyph, ch byte) bool {
	for _, g := range gs {
		if g.ch == ch {
			return true
		}
	}
	return false
}

// paintLegend colours each legend item's glyph as the lanes do.
func paintLegend(line string, colour bool) string {
	if !colour {
		return line
	}
	parts := strings.Split(line, "  ")
	for i, p := range parts {
		if len(p) < 2 || p[1] != ' ' {
			continue
		}
		for _, g := range legendOrder {
			if g.ch == p[0] && g.colour != "" {
				parts[i] = fmt.Sprintf("\x1b[%sm%c\x1b[0m%s", g.colour, p[0], p[1:])
				break
			}
		}
	}
	return strings.Join(parts, "  ")
}
