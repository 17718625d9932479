package plots

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"image/png"
	"io"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// -plots.out keeps the synthetic bench's pictures in a directory, to look
// at them; by default they go to a temporary one.
var outDir = flag.String("plots.out", "", "write the synthetic figures here")

func dirFor(t *testing.T) string {
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		return *outDir
	}
	return t.TempDir()
}

// checkFile asserts both renderings are well-formed and the SVG holds
// every expected text.
func checkFile(t *testing.T, f File, want ...string) {
	t.Helper()
	svg, err := os.ReadFile(f.SVG)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", f.SVG, err)
		}
	}
	text := svgText(svg)
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s: no %q in its text", f.SVG, w)
		}
	}
	fh, err := os.Open(f.PNG)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatalf("%s: %v", f.PNG, err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Errorf("%s is %v, too small to read", f.PNG, b)
	}
}

// svgText is the text content of an SVG, with XML entities decoded.
func svgText(svg []byte) string {
	var sb strings.Builder
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err != nil {
			return sb.String()
		}
		if cd, ok := tok.(xml.CharData); ok {
			sb.Write(cd)
			sb.WriteByte('\n')
		}
	}
}

func names(ps []Panel) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

const seed = 14

func TestSyntheticBench(t *testing.T) {
	t.Logf("seed %d", seed)
	dir := dirFor(t)
	panels := syntheticPanels(seed)
	f, err := Latency(dir, "latency", panels)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, f, append(names(panels), "p50", "p99", "fault", "detect (fault → detected)",
		"catch-up (→ lag back to normal)", "recovery point", "warm-up (excluded)", "latency (ms, log)")...)
	f, err = Lag(dir, "lag", panels)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, f, append(names(panels), "source lag", "fault", "lag (records)", "time since start (s)")...)
	f, err = Bill(dir, "bill", syntheticBills(seed))
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, f, append(names(panels), "detect (modelled)", "acquire (modelled)", "restore", "reprocess",
		"catch-up", "min–max of the repeats", "time (ms)")...)
	f, err = TradeOff(dir, "tradeoff", Axes{Title: "Steady-state latency vs time to recovered",
		X: "steady-state p99 latency (ms, log)", Y: "time to recovered (ms)", LogX: true}, syntheticPoints(seed))
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, f, append(names(panels), "steady-state p99 latency (ms, log)")...)
	curves, pred := syntheticSweep(seed)
	f, err = Sweep(dir, "sweep-load", Axes{Title: "Catch-up time against load",
		X: "load (% of own capacity)", Y: "catch-up (ms)"}, curves, pred)
	if err != nil {
		t.Fatal(err)
	}
	checkFile(t, f, append(names(panels), pred.Name, "load (% of own capacity)")...)
}

// TestDegenerate: inputs with nothing (or little) to draw give a figure
// that says so instead of a panic or an empty frame.
func TestDegenerate(t *testing.T) {
	dir := t.TempDir()
	none := []Panel{{Name: "alone"}}
	for _, tc := range []struct {
		name string
		draw func() (File, error)
		want []string
	}{
		{"latency-empty", func() (File, error) { return Latency(dir, "l0", nil) }, []string{"no data"}},
		{"latency-nobuckets", func() (File, error) { return Latency(dir, "l1", none) }, []string{"no data"}},
		{"lag-nobuckets", func() (File, error) { return Lag(dir, "g1", none) }, []string{"no data"}},
		{"bill-empty", func() (File, error) { return Bill(dir, "b0", nil) }, []string{"no data"}},
		{"bill-zero", func() (File, error) { return Bill(dir, "b1", []BillBar{{Name: "alone"}}) }, []string{"no data"}},
		{"tradeoff-empty", func() (File, error) { return TradeOff(dir, "t0", Axes{Title: "t"}, nil) }, []string{"no data"}},
		{"tradeoff-nan", func() (File, error) {
			return TradeOff(dir, "t1", Axes{Title: "t", LogX: true}, []Point{{Name: "alone", X: 0, Y: 1}})
		}, []string{"no data"}},
		{"sweep-empty", func() (File, error) { return Sweep(dir, "s0", Axes{Title: "s"}, []Curve{{Name: "alone"}}, nil) }, []string{"no data"}},
		{"bill-nan", func() (File, error) {
			return Bill(dir, "b2", []BillBar{{Name: "alone", Parts: []Part{{Name: "restore", Median: math.NaN()}}, Total: &Spread{Min: math.Inf(1)}}})
		}, []string{"no data"}},
		{"latency-nan", func() (File, error) {
			return Latency(dir, "l2", []Panel{{Name: "alone", Buckets: []report.Bucket{{Latency: &report.Latency{P50: math.NaN(), P99: math.Inf(1)}}}}})
		}, []string{"no data"}},
		{"bill-swapped-spread", func() (File, error) {
			return Bill(dir, "b3", []BillBar{{Name: "alone", Parts: []Part{{Name: "restore", Median: 5}}, Total: &Spread{Min: 9, Max: 2}}})
		}, []string{"alone", "min–max of the repeats"}},
		{"tradeoff-one", func() (File, error) {
			return TradeOff(dir, "t2", Axes{Title: "t"}, []Point{{Name: "alone", X: 3, Y: 5, XMin: 3, XMax: 3, YMin: 5, YMax: 5}})
		}, []string{"alone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.draw()
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, f, tc.want...)
		})
	}
}

// TestNeverCaughtUp: a crash whose later boundaries are nil shades up to
// the end of the run as cut off, and a contestant with no buckets beside
// one with data says so in its own panel.
func TestNeverCaughtUp(t *testing.T) {
	dir := t.TempDir()
	pn := syntheticPanels(seed)[0]
	pn.Phases[0].RestoredMs, pn.Phases[0].CaughtUpMs = nil, nil
	panels := []Panel{pn, {Name: "empty one"}}
	for _, draw := range []func(string, string, []Panel) (File, error){Latency, Lag} {
		f, err := draw(dir, "x", panels)
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, f, notCaughtUp, "no data for this contestant", "acquire (→ replacement)")
		svg, _ := os.ReadFile(f.SVG)
		if strings.Contains(svgText(svg), "restore (→ restored)") {
			t.Errorf("a restore that never finished is in the legend")
		}
	}
}

func TestPhaseSpans(t *testing.T) {
	ph := report.Phase{FaultMs: 4000, DetectedMs: f(4500), AcquiredMs: f(4500), RestoredMs: f(5000)}
	got := phaseSpans(ph, 8)
	want := []span{{4, 4.5, 0}, {4.5, 5, 2}, {5, 8, -1}}
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// A bar without a part (microbatch re-reads nothing) does not move the
// parts after it: the order, and so the colours, are those the parts
// happen in.
func TestBillPartOrderSurvivesAMissingPart(t *testing.T) {
	mk := func(names ...string) BillBar {
		var b BillBar
		for _, n := range names {
			b.Parts = append(b.Parts, Part{Name: n, Median: 1})
		}
		return b
	}
	got := partOrder([]BillBar{mk("detect", "acquire", "restore", "catch-up"), mk("detect", "acquire", "restore", "reprocess", "catch-up")})
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	if want := "detect acquire restore reprocess catch-up"; strings.Join(names, " ") != want {
		t.Errorf("part order %q, want %q", strings.Join(names, " "), want)
	}
}

// Linear axis labels carry no trailing zeros and no float noise.
func TestPlainTicks(t *testing.T) {
	for _, tk := range plainTicks.Ticks(0, 7500) {
		if tk.Label != "" && (strings.Contains(tk.Label, ".") || len(tk.Label) > 4) {
			t.Errorf("label %q of %g", tk.Label, tk.Value)
		}
	}
	for _, tk := range plainTicks.Ticks(0, 0.9) {
		if len(tk.Label) > 4 {
			t.Errorf("label %q of %g", tk.Label, tk.Value)
		}
	}
}

// TestFoldedBucketsAreDrawnAtTheirWidth: a series folded into wider
// buckets is drawn at its own width: each value at the middle of its
// interval, the run ending where the last interval ends.
func TestFoldedBucketsAreDrawnAtTheirWidth(t *testing.T) {
	pn := Panel{BucketMs: 400, Buckets: []report.Bucket{{TMs: 0, Lag: 1}, {TMs: 400, Lag: 2}, {TMs: 800, Lag: 3}}}
	if got := runEndS([]Panel{pn}); got != 1.2 {
		t.Errorf("run ends at %v s, want 1.2 (the last 400 ms bucket starts at 0.8 s)", got)
	}
	pts := runs(pn, func(b report.Bucket) (float64, bool) { return float64(b.Lag), true })
	if len(pts) != 1 || len(pts[0]) != 3 || pts[0][0].X != 0.2 || pts[0][2].X != 1.0 {
		t.Errorf("points %v, want one line at 0.2, 0.6, 1.0 s", pts)
	}
	pn.BucketMs = 0
	if got := runEndS([]Panel{pn}); got != 0.9 {
		t.Errorf("without a width: run ends at %v s, want 0.9 (recorded 100 ms buckets)", got)
	}
}
