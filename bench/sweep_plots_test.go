package bench

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// sweepFixture is a benchmark of two contestants × three repeats at each
// point of sweep, with figures that follow the shapes the sweep should
// show (plus seeded noise), and one failed run that must be left out.
func sweepFixture(seed uint64, sweep string, labels []string) *Results {
	rng := rand.New(rand.NewPCG(seed, 1))
	noise := func(v float64) *float64 { return pointTo(v * (0.9 + 0.2*rng.Float64())) }
	r := &Results{Version: ResultsVersion, Scenario: Scenario{Sweep: sweep, SweepPoints: labels, CadenceMs: 1000, Repeat: 3},
		Calibration: []Capacity{{Contestant: "a", RPS: 100000}, {Contestant: "b", RPS: 50000}}}
	_, pts, err := ParseSweep(sweep + "=" + joinLabels(labels))
	if err != nil {
		panic(err)
	}
	seq := 0
	for _, pt := range pts {
		for rep := range 3 {
			for ci, name := range []string{"a", "b"} {
				capa := r.Calibration[ci].RPS
				run := RunResult{Contestant: name, Repeat: rep, Seq: seq, SweepPoint: pt.Label, CadenceMs: 1000, Rate: 40000, Correct: true}
				seq++
				f := &run.Figures
				f.DetectMs, f.AcquireMs, f.RestoreMs = pointTo(500.0), pointTo(250.0), noise(100)
				f.ReprocessedRecords = pointTo(int64(20000))
				switch {
				case pt.Cadence > 0:
					run.CadenceMs = float64(pt.Cadence.Milliseconds())
					f.LatencyP99Ms = noise(10 + 2000/run.CadenceMs*float64(ci+1))
					f.RecoveredMs = noise(900 + run.CadenceMs)
				case pt.Load > 0:
					run.Rate = pt.Load * capa
					outage, _ := f.outage(run.Rate)
					f.CatchUpMs = noise(outage * pt.Load / (1 - pt.Load))
					f.CheckpointMs = noise(20 + 200*pt.Load*pt.Load*float64(2-ci))
				case pt.Parallelism > 0:
					run.Summary = &report.Summary{Parallelism: pt.Parallelism, Recoveries: []report.Recovery{{}},
						LostPieces: &report.LostPieces{RebuildMs: noise(800 / float64(pt.Parallelism-1))}}
					f.RecoveredMs = noise(1000 + 800/float64(pt.Parallelism-1))
				}
				r.Runs = append(r.Runs, run)
			}
		}
	}
	// A failed run with absurd figures: drawn, it would stretch every axis.
	bad := r.Runs[0]
	bad.Error, bad.Repeat = "storage unreachable", 3
	bad.Figures = Figures{LatencyP99Ms: pointTo(1e9), RecoveredMs: pointTo(1e9), CatchUpMs: pointTo(1e9), CheckpointMs: pointTo(1e9),
		RestoreMs: pointTo(1.0), PredictedCatchUpMs: pointTo(1e9)}
	r.Runs = append(r.Runs, bad)
	r.Predict()
	return r
}

func joinLabels(ls []string) string {
	out := ""
	for i, l := range ls {
		if i > 0 {
			out += ","
		}
		out += l
	}
	return out
}

func TestSweepFigures(t *testing.T) {
	seed := uint64(7)
	dir := t.TempDir()
	if out := os.Getenv("REWIND_SWEEP_FIXTURE_DIR"); out != "" {
		dir = out // to look at the pictures
	}
	for _, tc := range []struct {
		sweep  string
		labels []string
		files  []string
	}{
		{SweepCadence, []string{"100ms", "500ms", "1s", "5s"}, []string{"sweep-interval-tradeoff", "sweep-interval-latency", "sweep-interval-recovered"}},
		{SweepLoad, []string{"50%", "80%", "95%"}, []string{"sweep-load-catchup", "sweep-load-predicted", "sweep-load-checkpoint"}},
		{SweepParallelism, []string{"2", "4", "8"}, []string{"sweep-parallelism-rebuild", "sweep-parallelism-recovered"}},
	} {
		r := sweepFixture(seed, tc.sweep, tc.labels)
		files, err := r.sweepFigures(dir)
		if err != nil {
			t.Fatalf("seed %d, %s: %v", seed, tc.sweep, err)
		}
		if len(files) != len(tc.files) {
			t.Fatalf("seed %d, %s: %d figures, want %v", seed, tc.sweep, len(files), tc.files)
		}
		for i, f := range files {
			if f.Name != tc.files[i] {
				t.Errorf("%s: figure %d is %s, want %s", tc.sweep, i, f.Name, tc.files[i])
			}
			for _, p := range []string{f.SVG, f.PNG} {
				if st, err := os.Stat(p); err != nil || st.Size() < 1000 {
					t.Errorf("%s: %s missing or empty (%v)", tc.sweep, p, err)
				}
			}
		}
	}
	none := &Results{}
	if files, err := none.sweepFigures(dir); err != nil || files != nil {
		t.Fatalf("without a sweep: %v, %v", files, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep-load-catchup.png")); err != nil {
		t.Fatal(err)
	}
}

// TestSweepCurves: one curve per contestant, a point per sweep value with
// the median and min–max of the repeats, the failed run left out, points
// in x order.
func TestSweepCurves(t *testing.T) {
	r := &Results{Scenario: Scenario{Sweep: SweepCadence, SweepPoints: []string{"1s", "100ms"}}}
	add := func(name, label string, p99, rec float64, failed bool) {
		run := RunResult{Contestant: name, SweepPoint: label}
		run.Figures.LatencyP99Ms, run.Figures.RecoveredMs = pointTo(p99), pointTo(rec)
		if failed {
			run.Error = "boom"
		}
		r.Runs = append(r.Runs, run)
	}
	add("a", "1s", 5, 3000, false)
	add("a", "1s", 7, 1000, false)
	add("a", "1s", 6, 2000, false)
	add("a", "1s", 1e6, 1e6, true)
	add("a", "100ms", 20, 500, false)
	add("b", "1s", 9, 9, false)
	run := RunResult{Contestant: "b", SweepPoint: "100ms"} // nothing measured
	r.Runs = append(r.Runs, run)
	cs := r.sweepCurves(sweepFig(sweepP99), sweepFig(sweepRecovered))
	if len(cs) != 2 || cs[0].Name != "a" || cs[1].Name != "b" {
		t.Fatalf("curves %+v", cs)
	}
	a := cs[0].Points
	if len(a) != 2 || a[0].Name != "1s" || a[0].X != 6 || a[0].XMin != 5 || a[0].XMax != 7 || a[0].Y != 2000 || a[0].YMin != 1000 || a[0].YMax != 3000 ||
		a[1].Name != "100ms" || a[1].X != 20 {
		t.Fatalf("contestant a: %+v", a)
	}
	if len(cs[1].Points) != 1 {
		t.Fatalf("contestant b: %+v, want only the measured point", cs[1].Points)
	}
	if st := StatOf([]float64{4, 1, 3, 2}); st.Median != 2.5 || st.Min != 1 || st.Max != 4 {
		t.Fatalf("StatOf = %v %v %v", st.Median, st.Min, st.Max)
	}
}

func TestSweepPredictions(t *testing.T) {
	h := headroomPrediction(nil)
	if h != nil {
		t.Fatalf("a prediction without points: %+v", h)
	}
	r := sweepFixture(3, SweepLoad, []string{"50%", "80%"})
	curves := r.sweepCurves(func(run RunResult) *float64 {
		return pointTo(100 * (1 - run.Rate/Capacities(r.Calibration)[run.Contestant]))
	},
		sweepFig(sweepCatchUp))
	p := headroomPrediction(curves)
	if p == nil || len(p.Points) < 2 {
		t.Fatalf("no headroom prediction over %+v", curves)
	}
	for _, pt := range p.Points {
		if want := (100 - pt.X) / pt.X; math.Abs(pt.Y-want) > 1e-9 {
			t.Fatalf("prediction at %v%% headroom is %v, want %v", pt.X, pt.Y, want)
		}
	}
	// Every run of the fixture at a load point got its prediction from
	// the calibration (the failed one too: it has a bill).
	for _, run := range r.Runs {
		if run.Figures.PredictedCatchUpMs == nil {
			t.Fatalf("run %s %s: no prediction", run.Contestant, run.SweepPoint)
		}
	}
}
