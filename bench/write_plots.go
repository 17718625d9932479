package bench

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/bench/plots"
)

// plotOut is a written figure and the caption the page puts under it.
type plotOut struct {
	plots.File
	Caption string
}

// writePlots draws every figure of r into dir: latency and lag over time
// (per sweep point when there is a sweep), the bill, the trade-off, then
// the sweep curves.
func (r *Results) writePlots(dir string, groups []*Group) ([]plotOut, error) {
	var out []plotOut
	for _, pt := range r.pointsOf(groups) {
		at := groupsAt(groups, pt)
		suffix, where := "", ""
		if pt != "" {
			suffix, where = "-"+fileSafe(pt), fmt.Sprintf(" At %s = %s.", r.Scenario.Sweep, pt)
		}
		panels := r.panels(at)
		f, err := plots.Latency(dir, "latency"+suffix, panels)
		if err != nil {
			return nil, err
		}
		out = append(out, plotOut{f, "One panel per contestant, on shared axes; each shows its repeat with the median " +
			"time to recovered (named in the panel's title). Grey: the warm-up, left out of the figures; " +
			"dashed line: the fault; coloured bands: detect, acquire, restore and catch-up; ticks along the " +
			"bottom: recovery points." + where})
		f, err = plots.Lag(dir, "lag"+suffix, panels)
		if err != nil {
			return nil, err
		}
		out = append(out, plotOut{f, "Records offered but not yet read, for the same repeats as the latency figure: " +
			"the backlog builds while a contestant is down, jumps when a restore rewinds the source, and " +
			"drains during catch-up at the speed the contestant has to spare." + where})
	}
	f, err := plots.Bill(dir, "bill", billBars(groups))
	if err != nil {
		return nil, err
	}
	out = append(out, plotOut{f, "Each part is the median over the repeats, stacked in the order it happens; " +
		"reprocess is the part of the catch-up spent re-reading input read before the crash, catch-up the rest. " +
		"Hatched parts are modelled delays (--detect-delay, --acquire-delay), the same for everyone. The whisker " +
		"is the min–max of the repeats' time to recovered."})
	ax := plots.Axes{Title: "Steady-state latency vs time to recovered",
		X: "steady-state p99 latency (ms, log)", Y: "time to recovered (ms)", LogX: true}
	caption := "Each point is a contestant's median over the repeats; the bars are their min–max. " +
		"Lower left is better on both counts: fast while running and quick to recover."
	if r.Scenario.Sweep != "" {
		// One line per contestant through its sweep points, each point
		// named by its value: eight loose points would need eight colours.
		f, err = plots.Sweep(dir, "tradeoff", ax, tradeCurves(groups), nil)
		caption += fmt.Sprintf(" A line joins a contestant's points; each is labelled with its %s.", r.Scenario.Sweep)
	} else {
		f, err = plots.TradeOff(dir, "tradeoff", ax, tradePoints(groups))
	}
	if err != nil {
		return nil, err
	}
	out = append(out, plotOut{f, caption})
	sweeps, err := r.sweepFigures(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range sweeps {
		out = append(out, plotOut{s, "Median over the repeats at each point, min–max as error bars."})
	}
	return out, nil
}

// pointsOf are the sweep points present, in the sweep's order ("" alone
// without a sweep).
func (r *Results) pointsOf(groups []*Group) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range r.Scenario.SweepPoints {
		for _, g := range groups {
			if g.SweepPoint == p && !seen[p] {
				out, seen[p] = append(out, p), true
			}
		}
	}
	for _, g := range groups {
		if !seen[g.SweepPoint] {
			out, seen[g.SweepPoint] = append(out, g.SweepPoint), true
		}
	}
	return out
}

func groupsAt(groups []*Group, point string) []*Group {
	var out []*Group
	for _, g := range groups {
		if g.SweepPoint == point {
			out = append(out, g)
		}
	}
	return out
}

// panels are one panel per contestant: its median repeat's series.
func (r *Results) panels(groups []*Group) []plots.Panel {
	var out []plots.Panel
	for _, g := range groups {
		run := g.MedianRun()
		pn := plots.Panel{Name: fmt.Sprintf("%s: repeat %d of %d", g.Name(), run.Repeat+1, len(g.Runs)),
			WarmupMs: r.Scenario.WarmupMs}
		if s := run.Series; s != nil {
			pn.Buckets, pn.BucketMs, pn.Events, pn.Phases = s.Buckets, s.BucketMs, s.Events, s.Phases
		}
		if len(pn.Phases) == 0 && run.FaultAtMs != nil {
			// A fault that never fired has no phases: still show when it
			// was due.
			pn.FaultMs = *run.FaultAtMs
		}
		out = append(out, pn)
	}
	return out
}

// billParts are the bill in the order it happens; the Stat keys and the
// names the legend shows.
var billParts = []struct{ key, name, modelled string }{
	{"detect_ms", "detect", "detect"},
	{"acquire_ms", "acquire", "acquire"},
	{"restore_ms", "restore", ""},
	{"reprocess_ms", "reprocess", ""},
	{billRestKey, "catch-up", ""},
}

func billBars(groups []*Group) []plots.BillBar {
	var out []plots.BillBar
	for _, g := range groups {
		if !g.Stat("recovered_ms").Measured() && !g.Stat("restore_ms").Measured() {
			continue
		}
		b := plots.BillBar{Name: g.Name()}
		for _, p := range billParts {
			s := g.Stat(p.key)
			if !s.Measured() {
				continue
			}
			b.Parts = append(b.Parts, plots.Part{Name: p.name, Median: s.Median, Min: s.Min, Max: s.Max,
				Modelled: p.modelled != "" && g.Modelled(p.modelled)})
		}
		if t := g.Stat("recovered_ms"); t.Measured() {
			b.Total = &plots.Spread{Min: t.Min, Max: t.Max}
		}
		out = append(out, b)
	}
	return out
}

func tradePoints(groups []*Group) []plots.Point {
	var out []plots.Point
	for _, g := range groups {
		x, y := g.Stat("latency_p99_ms"), g.Stat("recovered_ms")
		if !x.Measured() || !y.Measured() {
			continue
		}
		out = append(out, plots.Point{Name: g.Name(), X: x.Median, XMin: x.Min, XMax: x.Max,
			Y: y.Median, YMin: y.Min, YMax: y.Max})
	}
	return out
}

// tradeCurves are tradePoints joined per contestant, in sweep order.
func tradeCurves(groups []*Group) []plots.Curve {
	var out []plots.Curve
	at := map[string]int{}
	for _, g := range groups {
		pts := tradePoints([]*Group{g})
		if len(pts) == 0 {
			continue
		}
		pts[0].Name = g.SweepPoint
		i, ok := at[g.Contestant]
		if !ok {
			i = len(out)
			at[g.Contestant] = i
			out = append(out, plots.Curve{Name: g.Contestant})
		}
		out[i].Points = append(out[i].Points, pts[0])
	}
	return out
}

// fileSafe turns a sweep point ("500ms", "80%") into part of a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		case r == '%':
			return 'p'
		}
		return '_'
	}, s)
}
