package plots

import (
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// CostSeries is one contestant at one parallelism: its throughput over
// the single-threaded reference's, per job (the order of Cost's jobs);
// NaN where it was not measured.
type CostSeries struct {
	Contestant  string
	Parallelism int
	Ratios      []float64
}

// Cost draws the COST figure: per job a group of bars, one per series,
// the height each one's throughput as a multiple of one good thread's,
// with the line at 1 where a parallel run starts to pay for its cores.
func Cost(dir, name string, jobs []string, series []CostSeries) (File, error) {
	title := "COST: unpaced throughput against the single-threaded reference"
	if len(jobs) == 0 || len(series) == 0 {
		return empty(title, "nothing was measured").write(dir, name)
	}
	p := newPlot("", "job", "throughput ÷ reference's (same input, same run)")
	p.NominalX(jobs...)
	legend := newLegend()
	// About three quarters of each job's slot of a 6-inch data area.
	w := vg.Points(330 / float64(len(jobs)*len(series)))
	top := 1.0
	var contestants []string
	maxPar := 1
	for _, s := range series {
		if !slices.Contains(contestants, s.Contestant) {
			contestants = append(contestants, s.Contestant)
		}
		maxPar = max(maxPar, s.Parallelism)
	}
	for i, s := range series {
		vals := make(plotter.Values, len(jobs))
		for j := range jobs {
			if j < len(s.Ratios) && s.Ratios[j] == s.Ratios[j] {
				vals[j] = s.Ratios[j]
				top = max(top, vals[j])
			}
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return File{}, err
		}
		// A contestant keeps its colour; fewer workers are drawn lighter.
		bars.Color = lighter(seriesColor(slices.Index(contestants, s.Contestant)), 0.5*(1-float64(s.Parallelism)/float64(maxPar)))
		bars.LineStyle.Width = 0
		bars.Offset = w * vg.Length(float64(i)-float64(len(series)-1)/2)
		p.Add(bars)
		legend.Add(fmt.Sprintf("%s ×%d", s.Contestant, s.Parallelism), bars)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	one.Color = faultColor
	p.Add(one)
	legend.Add("one thread (the reference)", one)
	p.Y.Min, p.Y.Max = 0, top*1.1
	p.Y.Tick.Marker = secondTicks(0)
	p.X.Min, p.X.Max = -0.6, float64(len(jobs))-0.4
	f := &figure{title: title, panels: []*plot.Plot{p}, legend: legend, w: 9 * vg.Inch, h: 4 * vg.Inch}
	return f.write(dir, name)
}
