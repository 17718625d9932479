package bench_test

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/report"
)

func TestProblemsOnePerLine(t *testing.T) {
	fired := func(r bench.RunResult) bench.RunResult {
		r.Fault, r.FaultAtMs, r.Figures.DetectMs = "worker=0,at=5s", f(5000), f(500)
		return r
	}
	r := &bench.Results{Runs: []bench.RunResult{
		fired(bench.RunResult{Contestant: "good", Correct: true, SteadyState: true}),
		fired(bench.RunResult{Contestant: "boom", Error: "worker 1: disk full\ngoroutine 7 [running]:"}),
		fired(bench.RunResult{Contestant: "wrong", Repeat: 1, SteadyState: true, Diff: "3 rows missing"}),
		fired(bench.RunResult{Contestant: "early", Correct: true, PointsBeforeFault: 1, SweepPoint: "80%"}),
		{Contestant: "unfired", Correct: true, SteadyState: true, Fault: "worker=0,at=5s", FaultAtMs: f(5000),
			Summary: &report.Summary{UnfiredFaults: []string{"worker=0,at=5s"}}},
		{Contestant: "no fault", Correct: true},
	}}
	got := r.Problems()
	want := []string{
		"boom #1: failed: worker 1: disk full …",
		"wrong #2: differs from the reference: 3 rows missing",
		"early @80% #1: not in steady state at the fault: 1 recovery point(s) after the warm-up, 2 needed",
		"unfired #1: the fault worker=0,at=5s never fired, so the run has no bill",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !r.Failed() {
		t.Error("Failed() is false with a failed and a wrong run")
	}
}
