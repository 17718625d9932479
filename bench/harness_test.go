package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/testseed"
	"github.com/rewind-engine/rewind/diskphase"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
	"github.com/rewind-engine/rewind/reference"
)

var known = []run.Executor{reference.Executor{}, microbatch.Executor{}, diskphase.Executor{}, recordwise.Executor{}}

func TestParseContestants(t *testing.T) {
	defaults := DefaultContestants(known)
	if defaults != "microbatch,diskphase,recordwise/aligned,recordwise/unaligned" {
		t.Fatalf("default contestants %q", defaults)
	}
	got, err := ParseContestants(defaults, known)
	if err != nil || len(got) != 4 || got[3].Name() != "recordwise/unaligned" {
		t.Fatalf("default contestants parsed as %v, %v", got, err)
	}
	if c, err := ParseContestants("recordwise", known); err != nil || c[0].Variant != "aligned" {
		t.Fatalf("bare recordwise: %v, %v; want aligned barriers", c, err)
	}
	for list, want := range map[string]string{
		"spark":                 "unknown executor",
		"reference":             "not a contestant",
		"microbatch/aligned":    "only recordwise takes a barrier mode",
		"recordwise/sideways":   "aligned or unaligned",
		"microbatch,microbatch": "listed twice",
	} {
		if _, err := ParseContestants(list, known); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseContestants(%q): %v, want an error containing %q", list, err, want)
		}
	}
}

// Repeat r's offset is a seeded draw within the r-th of N strata of the
// cycle: replayable from the seed, always within [0, 1) of a cadence, and
// N repeats cover the cycle one stratum each.
func TestJitterIsReplayableAndSpreadOverTheCycle(t *testing.T) {
	seed := int64(testseed.Seed(t))
	for n := 1; n <= 5; n++ {
		for r := range n {
			u := jitter(seed, r, n)
			if u != jitter(seed, r, n) {
				t.Fatalf("seed %d: jitter(r=%d, n=%d) differs between two calls", seed, r, n)
			}
			if lo, hi := float64(r)/float64(n), float64(r+1)/float64(n); u < lo || u >= hi {
				t.Fatalf("seed %d: jitter(r=%d, n=%d) = %g, want within [%g, %g)", seed, r, n, u, lo, hi)
			}
		}
	}
	if jitter(seed, 0, 1) == jitter(seed+1, 0, 1) {
		t.Fatalf("seeds %d and %d draw the same offset", seed, seed+1)
	}
}

// Three repeats of two contestants run A B A B A B; within a repeat both
// get the same fault moment, the default one shifted by that repeat's
// jitter; every run is checked against the reference, which runs once.
func TestRunsAreInterleavedWithOneFaultMomentPerRepeat(t *testing.T) {
	seed := int64(testseed.Seed(t))
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	p := doublesPlan(t, alloc, "a", "b")
	p.Repeat, p.Seed = 3, seed
	var progress bytes.Buffer
	p.Progress = &progress
	res, err := Run(context.Background(), p)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	if n := alloc.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes of Arrow memory still allocated", n)
	}
	if strings.Join(res.Order, ",") != "a,b" || len(res.Runs) != 6 {
		t.Fatalf("order %v, %d runs; want a,b and 6 runs", res.Order, len(res.Runs))
	}
	base := msOf(DefaultFault(p.Warmup, p.Cadence).At)
	if res.Scenario.FaultAtMs != base || res.Scenario.JitterMs != msOf(p.Cadence) || res.Scenario.Repeat != 3 {
		t.Fatalf("scenario %+v: want the fault at %g ms, a jitter of one cadence, 3 repeats", res.Scenario, base)
	}
	for i, rr := range res.Runs {
		want := []string{"a", "b"}[i%2]
		if rr.Contestant != want || rr.Repeat != i/2 || rr.Seq != i || !rr.Correct || rr.Error != "" {
			t.Fatalf("seed %d: run %d is %s repeat %d seq %d (correct %v, %s); want %s repeat %d, correct",
				seed, i, rr.Contestant, rr.Repeat, rr.Seq, rr.Correct, rr.Error, want, i/2)
		}
		if rr.FaultAtMs == nil {
			t.Fatalf("run %d has no fault moment", i)
		}
		wantAt := msOf((DefaultFault(p.Warmup, p.Cadence).At + time.Duration(jitter(seed, rr.Repeat, 3)*float64(p.Cadence)).Truncate(time.Millisecond)).Round(time.Millisecond))
		if *rr.FaultAtMs != wantAt || *rr.FaultAtMs < base || *rr.FaultAtMs >= base+msOf(p.Cadence) {
			t.Fatalf("seed %d: run %d fault at %g ms, want %g within [%g, %g)", seed, i, *rr.FaultAtMs, wantAt, base, base+msOf(p.Cadence))
		}
		if i%2 == 1 && *rr.FaultAtMs != *res.Runs[i-1].FaultAtMs {
			t.Fatalf("seed %d: repeat %d faults at %g for a and %g for b: want one moment", seed, rr.Repeat, *res.Runs[i-1].FaultAtMs, *rr.FaultAtMs)
		}
	}
	out := progress.String()
	if strings.Count(out, "reference run") != 1 || !strings.Contains(out, "[6/6] b repeat 3 fault at") || !strings.Contains(out, fmt.Sprintf("seed %d;", seed)) {
		t.Fatalf("seed %d: progress lacks one reference run, the run count or the seed:\n%s", seed, out)
	}
}

// A contestant that loses records is reported as failing the reference
// check, and the benchmark as failed; a right one beside it is not.
func TestBrokenContestantFailsTheReferenceCheck(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	p := doublesPlan(t, alloc, "echo", "lossy")
	p.Faults.None = true
	res, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if n := alloc.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes of Arrow memory still allocated", n)
	}
	if !res.Failed() || !res.Runs[0].Correct || res.Runs[1].Correct || res.Runs[1].Diff == "" {
		t.Fatalf("failed %v; echo correct %v; lossy correct %v, diff %q: want only lossy wrong, with a diff",
			res.Failed(), res.Runs[0].Correct, res.Runs[1].Correct, res.Runs[1].Diff)
	}
	if res.Runs[1].FaultAtMs != nil || res.Scenario.Fault != "" {
		t.Fatalf("--fail none gave a fault: %+v", res.Scenario)
	}
}

// hist is a histogram of n values of v ms.
func hist(v float64, n int64) *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)
	_ = h.RecordValues(int64(v*1000), n)
	return h
}

// The steady-state window of a synthetic run with known answers: 20
// buckets of 100 ms, 1,000 records each at 10 ms but bucket 15, whose 100
// rows took 50 ms; recovery points completed at 250, 1150, 2150 and 3150
// ms (the last two after the series' end), a failed one at 1500.
func TestWindowFiguresOfASyntheticRun(t *testing.T) {
	s := &report.Series{BucketMs: 100}
	for i := range 20 {
		b := report.Bucket{TMs: float64(i * 100), Processed: 1000, Hist: hist(10, 1000)}
		if i == 15 {
			b.Hist = hist(50, 100)
		}
		s.Buckets = append(s.Buckets, b)
	}
	for _, e := range []struct{ t, d float64 }{{250, 1}, {1150, 4}, {2150, 2}, {3150, 9}} {
		s.Events = append(s.Events, report.SeriesEvent{TMs: e.t, Kind: "checkpoint", Status: report.PointCompleted, DurationMs: ptr(e.d)})
	}
	s.Events = append(s.Events, report.SeriesEvent{TMs: 1500, Kind: "checkpoint", Status: report.PointFailed})
	near := func(got *float64, want float64) bool { return got != nil && math.Abs(*got-want) <= 0.02*want }

	// Warmup 1 s, fault at 1.65 s: buckets 10 to 15 (the one the fault
	// cuts is left out), 6,000 records in 0.6 s. Bucket 15's 100 rows are
	// 2 % of 5,100, so the p99 and the max are 50 ms, the p50 10 ms. One
	// point (1150) completed.
	f, points := steady(s, windowOf(s, 1000, 0, ptr(1650.0)))
	if !near(f.ThroughputRPS, 10_000) {
		t.Fatalf("window [1000,1650): throughput %v, want 10000 rec/s", deref(f.ThroughputRPS))
	}
	if !near(f.LatencyP50Ms, 10) || !near(f.LatencyP99Ms, 50) || !near(f.LatencyMaxMs, 50) {
		t.Fatalf("window [1000,1650): latency %v/%v/%v; want p50 10, p99 50, max 50 ms",
			deref(f.LatencyP50Ms), deref(f.LatencyP99Ms), deref(f.LatencyMaxMs))
	}
	if points != 1 || !near(f.CheckpointMs, 4) {
		t.Fatalf("window [1000,1650): %d points, median %v ms; want 1 of 4 ms", points, deref(f.CheckpointMs))
	}
	// Without a fault, from 200 ms to the end (2 s): two points (250,
	// 1150), median 2.5 ms. The 100 slow rows are 100 of 17,100, under
	// 1 %, so the merged p99 is 10 ms, where an average of the buckets'
	// p99s would say 12.2 ms.
	f, points = steady(s, windowOf(s, 200, 0, nil))
	if points != 2 || !near(f.CheckpointMs, 2.5) || !near(f.LatencyP99Ms, 10) || !near(f.LatencyMaxMs, 50) {
		t.Fatalf("window [200,2000): %d points, median %v ms, p99 %v, max %v; want 2 points of median 2.5 ms, p99 10, max 50 ms",
			points, deref(f.CheckpointMs), deref(f.LatencyP99Ms), deref(f.LatencyMaxMs))
	}
	// The input ended at 1.2 s: the window stops there.
	if w := windowOf(s, 200, 1200, nil); w.toMs != 1200 {
		t.Fatalf("window with the input ending at 1200 ms: %+v", w)
	}

	// The run's figures: the steady-state check counts the points between
	// the warmup and the fault, and the bill sums the recoveries.
	b := &bencher{Plan: Plan{Warmup: 200 * time.Millisecond}}
	sum := &report.Summary{Series: s, WallMs: 2000, Recoveries: []report.Recovery{
		{AtMs: ptr(1650.0), DetectMs: ptr(500.0), RestoreMs: ptr(3.0), ReprocessedRecords: ptr(int64(700)), Modelled: []string{"detect"}},
		{AtMs: ptr(1900.0), DetectMs: ptr(500.0), RestoreMs: ptr(4.0), Modelled: []string{"detect", "acquire"}}}}
	for _, c := range []struct {
		at     float64
		points int
		steady bool
	}{{1650, 2, true}, {1100, 1, false}} {
		rr := &RunResult{Fault: "worker=0,at=x", FaultAtMs: ptr(c.at)}
		sum.Recoveries[0].AtMs = ptr(c.at)
		b.figures(rr, sum, 10_000, Contestant{Executor: "x"})
		if rr.PointsBeforeFault != c.points || rr.SteadyState != c.steady {
			t.Fatalf("fault at %g: %d points, steady %v; want %d, %v", c.at, rr.PointsBeforeFault, rr.SteadyState, c.points, c.steady)
		}
		g := rr.Figures
		if !near(g.DetectMs, 1000) || !near(g.RestoreMs, 7) || g.ReprocessedRecords == nil || *g.ReprocessedRecords != 700 ||
			g.AcquireMs != nil || strings.Join(g.Modelled, ",") != "detect,acquire" || g.WallMs != 2000 {
			t.Fatalf("bill %+v: want detect 1000, restore 7, 700 re-read, no acquire, modelled detect and acquire", g)
		}
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// The live input is paced at the rate for the duration, one partition per
// worker; the reference reads the same records unpaced.
func TestGenInputsArePacedAndTheReferenceReadsThemUnpaced(t *testing.T) {
	in := GenInputs("keyed-count", 7, 150_000, 10*time.Second, 2)
	want := "gen:records=1500000,keys=1000,partitions=2,rate=150000,seed=7"
	if len(in) != 1 || in["in"] != want {
		t.Fatalf("inputs %v, want in=%s", in, want)
	}
	if got := unpaced(want); got != "gen:records=1500000,keys=1000,partitions=2,seed=7" {
		t.Fatalf("unpaced: %s", got)
	}
	if got := unpaced("file:/tmp/rate=5.csv"); got != "file:/tmp/rate=5.csv" {
		t.Fatalf("unpaced changed a file input: %s", got)
	}
	join := GenInputs("join", 7, 100_000, time.Second, 3)
	if len(join) != 2 || !strings.Contains(join["orders"], "rate=50000") || !strings.Contains(join["payments"], "seed=8") {
		t.Fatalf("join inputs %v: want the rate shared and a seed each", join)
	}
}

// A sweep point with a longer cadence gets its own default fault, after
// two of its own recovery points; a given fault is every point's.
func TestDefaultFaultFollowsThePointsCadence(t *testing.T) {
	p := Plan{Warmup: time.Second}
	for _, cadence := range []time.Duration{100 * time.Millisecond, time.Second, 5 * time.Second} {
		got := p.pointSpecs(nil, true, cadence)
		if len(got) != 1 || got[0].At != DefaultFault(time.Second, cadence).At || got[0].At < time.Second+2*cadence {
			t.Errorf("cadence %s: default fault %v, want one after the warmup and two recovery points", cadence, got)
		}
	}
	given := []fault.Spec{{Worker: 1, At: 2 * time.Second}}
	if got := p.pointSpecs(given, false, 5*time.Second); len(got) != 1 || got[0] != given[0] {
		t.Errorf("a given fault became %v", got)
	}
}
