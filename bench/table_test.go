package bench_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/bench/benchtest"
)

func checkWidth(t *testing.T, text string) {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(l); n > bench.TableWidth {
			t.Errorf("line %d is %d columns wide (max %d): %q", i+1, n, bench.TableWidth, l)
		}
	}
}

func table(t *testing.T, r *bench.Results) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteTableFitsWithLongNamesAndProblems(t *testing.T) {
	long := []string{"recordwise/aligned-with-a-name-far-too-long-for-a-column", "recordwise/unaligned",
		"microbatch/trigger-at-every-hundred-milliseconds", "diskphase"}
	r := fixture(t, benchtest.Options{Problems: true, Contestants: long,
		Sweep: "checkpoint-interval", SweepPoints: []string{"500ms", "1s"}})
	if _, err := r.WriteDir(outFor(t)); err != nil {
		t.Fatal(err)
	}
	out := table(t, r)
	t.Log("\n" + out)
	checkWidth(t, out)
	for _, want := range []string{
		long[0] + " @500ms", long[2] + " @1s", // long names are whole, on a line of their own
		"detect*", "acquire*", "* modelled",
		"FAIL diskphase @500ms: 2 of 3 runs equal the reference",
		"ok   recordwise/unaligned @1s: 3 of 3",
		"diskphase @500ms #2: differs from the reference: 12 rows missing",
		"not in steady state at the fault: ",
		"the fault worker=0,at=5s never fired",
		"Files in ", "report.html",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q", want)
		}
	}
}

// TestWriteTableFigures checks the cells of a table with known figures:
// the median on the contestant's line, the min–max right under it.
func TestWriteTableFigures(t *testing.T) {
	r := &bench.Results{Version: bench.ResultsVersion, Order: []string{"a"},
		Scenario: bench.Scenario{Job: "keyed-count", Repeat: 3, Fault: "worker=0,at=5s", DurationMs: 10000, Rate: 250000}}
	r.Runs = runsOf("a", []*float64{f(25), f(20), f(30)}, []*float64{f(1500), f(1200), f(14000)})
	for i := range r.Runs {
		r.Runs[i].Fault, r.Runs[i].FaultAtMs, r.Runs[i].SteadyState = "worker=0,at=5s", f(5000), true
		r.Runs[i].Figures.DetectMs = f(500)
	}
	out := table(t, r)
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	found := false
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "a" || i+1 >= len(lines) {
			continue
		}
		// Steady state: rec/s p50 p99 max point → only p99 was measured.
		if strings.Contains(l, "25.0") {
			found = true
			if got := strings.Fields(lines[i+1]); len(got) != 1 || got[0] != "20.0–30.0" {
				t.Errorf("under %q: %q, want the p99 range 20.0–30.0", l, lines[i+1])
			}
			if n := strings.Count(l, "—"); n != 4 {
				t.Errorf("%q: %d not-measured marks, want 4", l, n)
			}
		}
		if strings.Contains(l, "1500") && !strings.Contains(lines[i+1], "1200–14.0k") {
			t.Errorf("under %q: %q, want the recovered range 1200–14.0k", l, lines[i+1])
		}
	}
	if !found {
		t.Error("no steady-state line with the median p99 25.0")
	}
	if strings.Contains(out, "Files in") {
		t.Error("the table names files, but nothing was written")
	}
}
