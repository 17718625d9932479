// Package plots draws rewind bench's pictures from plain inputs: the
// latency and lag of each contestant over time with a crash's phases
// shaded, the recovery bill as stacked bars, the trade-off scatter and
// sweep curves. It takes its own small types (and the time series of
// dataflow/report) so that it does not depend on how the harness keeps its
// results. Every figure is written as NAME.svg and NAME.png.
package plots

import "github.com/rewind-engine/rewind/dataflow/report"

// Panel is one contestant's run over time.
type Panel struct {
	Name    string
	Buckets []report.Bucket
	// BucketMs is the buckets' width (report.Series.BucketMs; 0: the
	// width bench records at). A long run's series is folded into wider
	// buckets, and drawing them at the recorded width put each value
	// left of its interval and cut the last one short.
	BucketMs float64
	Phases   []report.Phase
	Events   []report.SeriesEvent
	// WarmupMs is shaded as excluded from the figures; 0 for none.
	WarmupMs float64
	// FaultMs draws a fault line when Phases does not carry one (for
	// example a fault that never fired is not drawn); 0 for none.
	FaultMs float64
}

// BillBar is one contestant's recovery bill, in the order the parts
// happen (detect, acquire, restore, reprocess, catch-up).
type BillBar struct {
	Name  string
	Parts []Part
	// Total is the min–max spread of the repeats' total; nil draws no
	// whisker (the spread of a sum is not the sum of the spreads).
	Total *Spread
}

// Part is one part of a bill, in milliseconds over the repeats.
type Part struct {
	Name             string
	Median, Min, Max float64
	// Modelled parts (a configured heartbeat timeout, a configured time to
	// get a replacement) are drawn lighter and hatched, and labelled.
	Modelled bool
}

// Spread is a min–max range over repeats.
type Spread struct{ Min, Max float64 }

// Point is one contestant's (or one sweep point's) median with the
// min–max of its repeats on both axes.
type Point struct {
	Name          string
	X, XMin, XMax float64
	Y, YMin, YMax float64
}

// Curve is one contestant's points of a sweep, in x order.
type Curve struct {
	Name   string
	Points []Point
}

// Axes names a figure and its axes; the axis labels carry the units.
type Axes struct {
	Title, X, Y string
	// LogX and LogY draw that axis on a log scale (values ≤ 0 are left
	// out of a log axis).
	LogX, LogY bool
}

// File is one written figure: its title and the paths of its two renderings.
type File struct {
	Name, Title string
	SVG, PNG    string
}
