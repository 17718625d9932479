package bench

import (
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

type plotFile struct{ title, file string }

// writePlots draws the latency bars of the crash-free runs and, when there
// were crash runs, latency against the time the crash cost: the trade the
// benchmark exists to show.
func (r *Report) writePlots(dir string) ([]plotFile, error) {
	var names []string
	var p50, p99 plotter.Values
	var trade plotter.XYs
	var tradeNames []string
	for _, res := range r.Results {
		clean := summaryOf(res.Clean)
		if clean == nil || clean.LatencyMs == nil {
			continue
		}
		names = append(names, res.Contestant)
		p50 = append(p50, clean.LatencyMs.P50)
		p99 = append(p99, clean.LatencyMs.P99)
		if crash := summaryOf(res.Crash); crash != nil {
			if rec := BillOf(clean, crash).RecoveryMs(); rec != nil && clean.LatencyMs.P99 > 0 {
				trade = append(trade, plotter.XY{X: clean.LatencyMs.P99, Y: *rec})
				tradeNames = append(tradeNames, res.Contestant)
			}
		}
	}
	var out []plotFile
	if len(names) > 0 {
		p := plot.New()
		p.Title.Text = "End-to-end latency, crash-free run"
		p.Y.Label.Text = "ms"
		w := vg.Points(18)
		bars50, err := plotter.NewBarChart(p50, w)
		if err != nil {
			return nil, err
		}
		bars99, err := plotter.NewBarChart(p99, w)
		if err != nil {
			return nil, err
		}
		bars50.Color = color.RGBA{R: 90, G: 140, B: 200, A: 255}
		bars99.Color = color.RGBA{R: 220, G: 120, B: 60, A: 255}
		bars50.Offset, bars99.Offset = -w/2, w/2
		p.Add(bars50, bars99)
		p.Legend.Add("p50", bars50)
		p.Legend.Add("p99", bars99)
		p.Legend.Top = true
		p.NominalX(names...)
		f := plotFile{"latency", "latency.png"}
		if err := p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, f.file)); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if len(trade) > 0 {
		p := plot.New()
		p.Title.Text = "Latency while running vs. cost of one crash"
		p.X.Label.Text = "p99 latency, crash-free (ms, log scale)"
		p.Y.Label.Text = "detect + restore + catch-up (ms)"
		// Latencies span orders of magnitude (a record-wise pipeline against
		// a disk-phase job covering the whole input).
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		sc, err := plotter.NewScatter(trade)
		if err != nil {
			return nil, err
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: trade, Labels: tradeNames})
		if err != nil {
			return nil, err
		}
		p.Add(sc, labels, plotter.NewGrid())
		// Room around the points for their labels, a zero-based cost axis,
		// and at least one power of ten on the latency axis.
		xmin, xmax, _, ymax := plotter.XYRange(trade)
		p.X.Min, p.X.Max = xmin/3, xmax*3
		p.Y.Min, p.Y.Max = 0, ymax*1.2+1
		f := plotFile{"latency vs. recovery cost", "tradeoff.png"}
		if err := p.Save(7*vg.Inch, 5*vg.Inch, filepath.Join(dir, f.file)); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}
