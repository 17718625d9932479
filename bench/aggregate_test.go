package bench_test

import (
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/bench/benchtest"
)

func f(v float64) *float64 { return &v }

// runsOf makes runs of one contestant with the given p99s and times to
// recovered (nil: not measured).
func runsOf(name string, p99, recovered []*float64) []bench.RunResult {
	var out []bench.RunResult
	for i := range p99 {
		out = append(out, bench.RunResult{Contestant: name, Repeat: i, Correct: true,
			Figures: bench.Figures{LatencyP99Ms: p99[i], RecoveredMs: recovered[i], DuplicateRows: int64(i)}})
	}
	return out
}

func TestAggregateMedianMinMaxSkipsUnmeasured(t *testing.T) {
	r := &bench.Results{Order: []string{"b", "a"}}
	r.Runs = append(r.Runs, runsOf("a", []*float64{f(10), f(30), nil, f(20)}, []*float64{f(300), nil, f(100), f(200)})...)
	r.Runs = append(r.Runs, runsOf("b", []*float64{f(1), f(3)}, []*float64{nil, nil})...)
	groups := r.Aggregate()
	if len(groups) != 2 || groups[0].Contestant != "b" || groups[1].Contestant != "a" {
		t.Fatalf("groups %v, want b then a (the run order)", names(groups))
	}
	a, b := groups[1], groups[0]
	for _, c := range []struct {
		g    *bench.Group
		key  string
		want bench.Stat
	}{
		{a, "latency_p99_ms", bench.Stat{Median: 20, Min: 10, Max: 30, N: 3}},
		{a, "recovered_ms", bench.Stat{Median: 200, Min: 100, Max: 300, N: 3}},
		{a, "duplicate_rows", bench.Stat{Median: 1.5, Min: 0, Max: 3, N: 4}},
		{b, "latency_p99_ms", bench.Stat{Median: 2, Min: 1, Max: 3, N: 2}},
		{b, "recovered_ms", bench.Stat{}},
		{b, "throughput_rps", bench.Stat{}},
	} {
		if got := c.g.Stat(c.key); got != c.want {
			t.Errorf("%s %s = %+v, want %+v", c.g.Contestant, c.key, got, c.want)
		}
	}
	if got := a.MedianRun(); got.Repeat != 3 {
		t.Errorf("median run of a is repeat %d, want 3 (recovered 200 of 100, 200, 300)", got.Repeat)
	}
	a.Runs[3].Correct = false
	if got := a.MedianRun(); got.Repeat != 2 {
		t.Errorf("median run of a without its wrong repeat 3 is repeat %d, want 2 (recovered 100 of 100, 300: the lower middle)", got.Repeat)
	}
	if got := b.MedianRun(); got.Repeat != 0 {
		t.Errorf("median run of b (none recovered) is repeat %d, want 0", got.Repeat)
	}
}

func names(gs []*bench.Group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name())
	}
	return out
}

func TestAggregateBySweepPoint(t *testing.T) {
	r := fixture(t, benchtest.Options{Repeats: 2, Sweep: "checkpoint-interval", SweepPoints: []string{"500ms", "2s"}})
	groups := r.Aggregate()
	want := []string{
		"recordwise/aligned @500ms", "recordwise/aligned @2s", "recordwise/unaligned @500ms", "recordwise/unaligned @2s",
		"microbatch @500ms", "microbatch @2s", "diskphase @500ms", "diskphase @2s",
	}
	got := names(groups)
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("groups %v, want %v", got, want)
		}
		if n := len(groups[i].Runs); n != 2 {
			t.Errorf("%s has %d runs, want 2", got[i], n)
		}
	}
}

func TestStatOfEvenAndOdd(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want bench.Stat
	}{
		{nil, bench.Stat{}},
		{[]float64{5}, bench.Stat{Median: 5, Min: 5, Max: 5, N: 1}},
		{[]float64{9, 1, 5}, bench.Stat{Median: 5, Min: 1, Max: 9, N: 3}},
		{[]float64{4, 1, 2, 8}, bench.Stat{Median: 3, Min: 1, Max: 8, N: 4}},
	} {
		if got := bench.StatOf(c.in); got != c.want {
			t.Errorf("StatOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}
