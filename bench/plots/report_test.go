package plots

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench/page"
)

// TestSyntheticReport draws the synthetic bench and puts every figure in
// a report.html (kept under -plots.out, to open in a browser): the page
// must carry each figure's legend names, inline, with nothing fetched.
func TestSyntheticReport(t *testing.T) {
	t.Logf("seed %d", seed)
	dir := dirFor(t)
	panels := syntheticPanels(seed)
	curves, pred := syntheticSweep(seed)
	var files []File
	for _, draw := range []func() (File, error){
		func() (File, error) { return Latency(dir, "latency", panels) },
		func() (File, error) { return Lag(dir, "lag", panels) },
		func() (File, error) { return Bill(dir, "bill", syntheticBills(seed)) },
		func() (File, error) {
			return TradeOff(dir, "tradeoff", Axes{Title: "Steady-state latency vs time to recovered",
				X: "steady-state p99 latency (ms, log)", Y: "time to recovered (ms)", LogX: true}, syntheticPoints(seed))
		},
		func() (File, error) {
			return Sweep(dir, "sweep-load", Axes{Title: "Catch-up time against load",
				X: "load (% of own capacity)", Y: "catch-up (ms)"}, curves, pred)
		},
	} {
		f, err := draw()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	r := page.Report{
		Title:    "rewind bench (synthetic data)",
		Subtitle: "drawn from a seeded synthetic timeline, not a measurement",
		Sections: []page.Section{
			{Title: "Scenario", Rows: []page.Row{{Key: "duration", Value: "8 s"}, {Key: "rate", Value: "250000 records/s"},
				{Key: "fault", Value: "worker 0 at 4 s"}, {Key: "warm-up", Value: "1 s"}, {Key: "repeats", Value: "3"}}},
			{Title: "Machine", Rows: []page.Row{{Key: "cores", Value: "2"}, {Key: "Go", Value: "go1.x"}, {Key: "storage", Value: "local disk"}}},
		},
		Verdicts:  []page.Verdict{{Run: "microbatch #1", OK: true}, {Run: "diskphase #1", OK: false, Detail: "12 rows missing"}},
		HowToRead: []string{"Each latency panel is one contestant; the dashed line is the fault and the coloured bands its phases."},
	}
	tbl := page.Table{Caption: "Recovery bill (ms, median of 3)", Header: []string{"contestant", "detect", "acquire", "restore", "reprocess", "catch-up"}}
	for _, b := range syntheticBills(seed) {
		row := []string{b.Name}
		for _, p := range b.Parts {
			row = append(row, strconv.FormatFloat(p.Median, 'f', 0, 64))
		}
		tbl.Rows = append(tbl.Rows, row)
	}
	r.Tables = []page.Table{tbl}
	for _, f := range files {
		svg, err := os.ReadFile(f.SVG)
		if err != nil {
			t.Fatal(err)
		}
		r.Figures = append(r.Figures, page.Figure{Title: f.Title, Caption: f.Name + ".svg / .png", SVG: svg})
	}
	out := filepath.Join(dir, "report.html")
	if err := page.Write(out, r); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(html)
	if n := strings.Count(s, "<svg"); n != len(files) {
		t.Errorf("%d inline SVGs, want %d", n, len(files))
	}
	if strings.Contains(s, "could not be shown") {
		t.Error("a figure was refused by the page")
	}
	for _, want := range append(names(panels), "detect (modelled)", pred.Name, "p99", "source lag") {
		if !strings.Contains(s, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`).FindString(s); m != "" {
		t.Errorf("report.html fetches %q", m)
	}
}
