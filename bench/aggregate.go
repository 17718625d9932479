package bench

import (
	"slices"
	"sort"
)

// Metric is one figure of Figures, named as results.json and results.csv
// name it, with a short label for tables.
type Metric struct {
	// Key is the figure's JSON name (latency_p99_ms).
	Key string
	// Label is a short column title without the unit; Unit is "ms",
	// "rec/s", "records", "bytes" or "rows".
	Label, Unit string
	of          func(*Figures) (float64, bool)
}

// Of is the figure in f; false when it was not measured.
func (m Metric) Of(f *Figures) (float64, bool) { return m.of(f) }

func ptrF(get func(*Figures) *float64) func(*Figures) (float64, bool) {
	return func(f *Figures) (float64, bool) {
		if p := get(f); p != nil {
			return *p, true
		}
		return 0, false
	}
}

func ptrI(get func(*Figures) *int64) func(*Figures) (float64, bool) {
	return func(f *Figures) (float64, bool) {
		if p := get(f); p != nil {
			return float64(*p), true
		}
		return 0, false
	}
}

// always is a figure every run has (a count, the wall time).
func always(get func(*Figures) float64) func(*Figures) (float64, bool) {
	return func(f *Figures) (float64, bool) { return get(f), true }
}

// Metrics are every figure of Figures except Modelled and Measured, in
// its order.
var Metrics = []Metric{
	{"throughput_rps", "throughput", "rec/s", ptrF(func(f *Figures) *float64 { return f.ThroughputRPS })},
	{"latency_p50_ms", "p50", "ms", ptrF(func(f *Figures) *float64 { return f.LatencyP50Ms })},
	{"latency_p99_ms", "p99", "ms", ptrF(func(f *Figures) *float64 { return f.LatencyP99Ms })},
	{"latency_max_ms", "max", "ms", ptrF(func(f *Figures) *float64 { return f.LatencyMaxMs })},
	{"checkpoint_ms", "point", "ms", ptrF(func(f *Figures) *float64 { return f.CheckpointMs })},
	{"detect_ms", "detect", "ms", ptrF(func(f *Figures) *float64 { return f.DetectMs })},
	{"acquire_ms", "acquire", "ms", ptrF(func(f *Figures) *float64 { return f.AcquireMs })},
	{"restore_ms", "restore", "ms", ptrF(func(f *Figures) *float64 { return f.RestoreMs })},
	{"restore_bytes", "restored", "bytes", ptrI(func(f *Figures) *int64 { return f.RestoreBytes })},
	{"reprocessed_records", "re-read", "records", ptrI(func(f *Figures) *int64 { return f.ReprocessedRecords })},
	{"reprocess_ms", "reprocess", "ms", ptrF(func(f *Figures) *float64 { return f.ReprocessMs })},
	{"catch_up_ms", "catch-up", "ms", ptrF(func(f *Figures) *float64 { return f.CatchUpMs })},
	{"recovered_ms", "recovered", "ms", ptrF(func(f *Figures) *float64 { return f.RecoveredMs })},
	{"predicted_catch_up_ms", "predicted", "ms", ptrF(func(f *Figures) *float64 { return f.PredictedCatchUpMs })},
	{"duplicate_rows", "duplicates", "rows", always(func(f *Figures) float64 { return float64(f.DuplicateRows) })},
	{"conflicting_rows", "conflicting", "rows", always(func(f *Figures) float64 { return float64(f.ConflictingRows) })},
	{"lost_records", "lost", "records", always(func(f *Figures) float64 { return float64(f.LostRecords) })},
	{"wall_ms", "wall", "ms", always(func(f *Figures) float64 { return f.WallMs })},
}

// MetricByKey returns the metric named key.
func MetricByKey(key string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Key == key {
			return m, true
		}
	}
	return Metric{}, false
}

// Stat is one figure over a group's runs: the median and the min–max of
// the N runs that measured it (N = 0: none did).
type Stat struct {
	Median, Min, Max float64
	N                int
}

// Measured says at least one run had the figure.
func (s Stat) Measured() bool { return s.N > 0 }

// StatOf is the median and min–max of vs (an even count takes the mean of
// the two middle values).
func StatOf(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// Group is one contestant at one sweep point: its repeats and every
// figure over them.
type Group struct {
	Contestant, SweepPoint string
	Runs                   []*RunResult
	stats                  map[string]Stat
}

// Name is the contestant, with the sweep point after an @ when there is one.
func (g *Group) Name() string {
	if g.SweepPoint == "" {
		return g.Contestant
	}
	return g.Contestant + " @" + g.SweepPoint
}

// Stat is the figure named key (a Metric key) over the group's runs.
func (g *Group) Stat(key string) Stat { return g.stats[key] }

// Modelled says whether any run labelled the bill part (detect, acquire)
// as a modelled delay.
func (g *Group) Modelled(part string) bool {
	for _, r := range g.Runs {
		if slices.Contains(r.Figures.Modelled, part) {
			return true
		}
	}
	return false
}

// Measured says whether any run measured the bill part (detect,
// acquire) on a worker process.
func (g *Group) Measured(part string) bool {
	for _, r := range g.Runs {
		if slices.Contains(r.Figures.Measured, part) {
			return true
		}
	}
	return false
}

// Correct counts the runs that equal the reference and did not fail.
func (g *Group) Correct() int {
	n := 0
	for _, r := range g.Runs {
		if r.Correct && r.Error == "" {
			n++
		}
	}
	return n
}

// statOver computes one figure of runs, skipping those that lack it.
func statOver(runs []*RunResult, of func(*Figures) (float64, bool)) Stat {
	var vs []float64
	for _, r := range runs {
		if v, ok := of(&r.Figures); ok {
			vs = append(vs, v)
		}
	}
	return StatOf(vs)
}

// Aggregate groups the runs by contestant × sweep point, contestants in
// their run order and points in the order the sweep gave them, and takes
// the median and min–max of every figure.
func (r *Results) Aggregate() []*Group {
	byKey := map[[2]string]*Group{}
	var groups []*Group
	for i := range r.Runs {
		run := &r.Runs[i]
		k := [2]string{run.Contestant, run.SweepPoint}
		g := byKey[k]
		if g == nil {
			g = &Group{Contestant: run.Contestant, SweepPoint: run.SweepPoint}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.Runs = append(g.Runs, run)
	}
	rank := func(list []string, s string) int {
		if i := slices.Index(list, s); i >= 0 {
			return i
		}
		return len(list)
	}
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if ca, cb := rank(r.Order, a.Contestant), rank(r.Order, b.Contestant); ca != cb {
			return ca < cb
		}
		return rank(r.Scenario.SweepPoints, a.SweepPoint) < rank(r.Scenario.SweepPoints, b.SweepPoint)
	})
	for _, g := range groups {
		sort.SliceStable(g.Runs, func(i, j int) bool { return g.Runs[i].Repeat < g.Runs[j].Repeat })
		g.stats = map[string]Stat{}
		for _, m := range Metrics {
			g.stats[m.Key] = statOver(g.Runs, m.of)
		}
		g.stats[billRestKey] = statOver(g.Runs, billRest)
	}
	return groups
}

// billRestKey is the catch-up after re-reading: catch-up minus reprocess,
// so the bill's parts do not overlap (re-reading happens inside the
// catch-up) and add up to the time to recovered.
const billRestKey = "catch_up_after_reprocess_ms"

func billRest(f *Figures) (float64, bool) {
	if f.CatchUpMs == nil {
		return 0, false
	}
	rest := *f.CatchUpMs
	if f.ReprocessMs != nil {
		rest -= *f.ReprocessMs
	}
	return max(rest, 0), true
}

// MedianRun is the repeat whose time to recovered is the median of the
// group's (the lower middle of an even count), among the runs without a
// problem when there are any (a run that failed, differs, crashed before
// steady state or never crashed shows nothing typical); runs without a
// time to recovered come last, and without any the first repeat is
// taken. The timeline plots show this repeat.
func (g *Group) MedianRun() *RunResult {
	if len(g.Runs) == 0 {
		return nil
	}
	pool := g.Runs
	var clean []*RunResult
	for _, r := range g.Runs {
		if ok, _ := r.Verdict(); ok && r.FaultFired() && (r.Fault == "" || r.SteadyState) {
			clean = append(clean, r)
		}
	}
	if len(clean) > 0 {
		pool = clean
	}
	var with []*RunResult
	for _, r := range pool {
		if r.Figures.RecoveredMs != nil {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return pool[0]
	}
	sort.SliceStable(with, func(i, j int) bool { return *with[i].Figures.RecoveredMs < *with[j].Figures.RecoveredMs })
	return with[(len(with)-1)/2]
}
