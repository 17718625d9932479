package bench_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/bench/benchtest"
)

func TestCompareRatiosAndOnlyOnOneSide(t *testing.T) {
	old := &bench.Results{Version: bench.ResultsVersion, Order: []string{"a", "gone"}}
	old.Runs = append(runsOf("a", []*float64{f(10), f(20), f(30)}, []*float64{f(1000), f(1100), f(900)}),
		runsOf("gone", []*float64{f(1)}, []*float64{nil})...)
	new := &bench.Results{Version: bench.ResultsVersion, Order: []string{"a", "added"}}
	new.Scenario.Rate = 300000
	new.Runs = append(runsOf("a", []*float64{f(40), f(40), f(40)}, []*float64{f(500), f(500), f(500)}),
		runsOf("added", []*float64{f(1)}, []*float64{nil})...)
	c, err := bench.Compare(old, new)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) != 1 || c.Pairs[0].Old.Contestant != "a" {
		t.Fatalf("pairs %+v, want a alone", c.Pairs)
	}
	if len(c.OnlyOld) != 1 || c.OnlyOld[0] != "gone" || len(c.OnlyNew) != 1 || c.OnlyNew[0] != "added" {
		t.Errorf("only OLD %v, only NEW %v; want [gone] and [added]", c.OnlyOld, c.OnlyNew)
	}
	var b bytes.Buffer
	if err := c.WriteText(&b, "old/results.json", "new/results.json"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	checkWidth(t, out)
	for _, want := range []string{"Set-up differs: rate 0 → 300000", "Only in OLD: gone", "Only in NEW: added",
		"a: OLD 3 of 3 runs correct, NEW 3 of 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q", want)
		}
	}
	// p99: median 20 (10–30) → 40: ratio 2.00; recovered 1000 → 500: 0.50.
	for _, row := range [][]string{{"p99", "ms", "20.0", "(10.0–30.0)", "40.0", "2.00"}, {"recovered", "ms", "1000", "(900–1100)", "500", "0.50"}} {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if strings.Join(strings.Fields(l), " ") == strings.Join(row, " ") {
				found = true
			}
		}
		if !found {
			t.Errorf("no line %q", strings.Join(row, " "))
		}
	}
	if strings.Contains(out, "throughput") {
		t.Error("a figure neither side measured is listed")
	}
}

func TestCompareFixturesFits(t *testing.T) {
	old := fixture(t, benchtest.Options{Problems: true})
	new := benchtest.Results(benchtest.Options{Seed: fixtureSeed + 1, Slower: 1.3,
		Contestants: []string{"recordwise/aligned-with-a-name-far-too-long-for-a-column"}})
	c, err := bench.Compare(old, new)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.WriteText(&b, strings.Repeat("very/long/path/", 6)+"results.json", "new/results.json"); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, b.String())
	if len(c.Pairs) != 3 {
		t.Errorf("%d pairs, want 3 (one contestant renamed)", len(c.Pairs))
	}
}

func TestCompareNothingInCommon(t *testing.T) {
	old := &bench.Results{Runs: runsOf("a", []*float64{f(1)}, []*float64{nil})}
	new := &bench.Results{Runs: runsOf("b", []*float64{f(1)}, []*float64{nil})}
	_, err := bench.Compare(old, new)
	if !errors.Is(err, bench.ErrNothingInCommon) {
		t.Fatalf("err %v, want ErrNothingInCommon", err)
	}
	if !strings.Contains(err.Error(), "OLD has a; NEW has b") {
		t.Errorf("error %q does not say what each side has", err)
	}
}

func TestReadResultsRefusesOtherVersions(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, body, want string }{
		{"v1.json", `{"version": 1, "runs": []}`, "results version 1, this rewind reads version 2"},
		{"none.json", `{"results": []}`, "no version in it"},
		{"text.json", `hello`, "not a rewind bench results.json"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := bench.ReadResults(p)
		var fe *bench.FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%s: err %v, want a FormatError naming the file and saying %q", c.name, err, c.want)
		}
	}
	good, err := json.Marshal(bench.Results{Version: bench.ResultsVersion})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "good.json")
	if err := os.WriteFile(p, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bench.ReadResults(p); err != nil {
		t.Errorf("version %d refused: %v", bench.ResultsVersion, err)
	}
}
