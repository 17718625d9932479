package plots

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// secondTicks labels the time axis at a round step giving 5–10 labels,
// finer than gonum's default (which leaves an 8 s run with three).
func secondTicks(endS float64) plot.Ticker {
	return plot.TickerFunc(func(min, max float64) []plot.Tick {
		step := 1.0
		for _, s := range []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600} {
			step = s
			if (max-min)/s <= 10 {
				break
			}
		}
		var out []plot.Tick
		for i := math.Ceil(min / step); i*step <= max+1e-9; i++ {
			v := math.Round(i*step*1e9) / 1e9 // 7 × 0.2 reads 1.4
			out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		}
		return out
	})
}

// relabelled are gonum's default ticks with each label written by the
// function: countTicks write large counts short (300k, 1.2M), so a lag
// axis stays narrow; plainTicks write numbers without trailing zeros
// (7500, not 7500.00).
type relabelled func(float64) string

var (
	countTicks = relabelled(shortCount)
	plainTicks = relabelled(func(v float64) string {
		// Rounded first, so 0.1+0.2 reads 0.3.
		return strconv.FormatFloat(math.Round(v*1e9)/1e9, 'f', -1, 64)
	})
)

func (f relabelled) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = f(ts[i].Value)
		}
	}
	return ts
}

func shortCount(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// logTicks label 1, 2 and 5 of each decade when the axis spans few
// decades (gonum's log ticks label only powers of ten, which leaves a
// one-decade axis with one or two numbers).
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(min, max)
	if max/min > 1e3 {
		return ts
	}
	labelled := map[float64]bool{}
	for _, t := range ts {
		if t.Label != "" {
			labelled[t.Value] = true
		}
	}
	for i := range ts {
		v := ts[i].Value
		if labelled[v] {
			// gonum lists a decade twice (major and minor): label it once.
			continue
		}
		m := v / math.Pow(10, math.Floor(math.Log10(v)+1e-9))
		if math.Abs(m-2) < 1e-6 || math.Abs(m-5) < 1e-6 || math.Abs(m-1) < 1e-6 {
			ts[i].Label = strconv.FormatFloat(v, 'g', -1, 64)
			labelled[v] = true
		}
	}
	return ts
}
