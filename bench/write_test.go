package bench_test

import (
	"encoding/csv"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/bench/benchtest"
)

// -bench.out keeps the fixture's files in a directory, to look at them;
// by default they go to a temporary one.
var outDir = flag.String("bench.out", "", "write the fixture's bench output here")

func outFor(t *testing.T) string {
	t.Helper()
	if *outDir != "" {
		dir := filepath.Join(*outDir, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// fixtureSeed seeds every fixture here; a failure names it.
const fixtureSeed = 7

func fixture(t *testing.T, o benchtest.Options) *bench.Results {
	t.Helper()
	t.Logf("fixture seed %d", fixtureSeed)
	o.Seed = fixtureSeed
	return benchtest.Results(o)
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

func col(t *testing.T, header []string, name string) int {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("no column %q in %v", name, header)
	}
	return i
}

func TestWriteDirFiles(t *testing.T) {
	r := fixture(t, benchtest.Options{Problems: true})
	dir := outFor(t)
	paths, err := r.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		if filepath.Dir(p) != dir {
			t.Errorf("%s is not in %s", p, dir)
		}
		names = append(names, filepath.Base(p))
	}
	want := []string{"results.json", "results.csv", "timeline.csv", "timeline_events.csv",
		"latency.svg", "latency.png", "lag.svg", "lag.png", "bill.svg", "bill.png",
		"tradeoff.svg", "tradeoff.png", "report.html"}
	if !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}

	// results.json reads back to the same runs.
	back, err := bench.ReadResults(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if back.Version != bench.ResultsVersion || len(back.Runs) != len(r.Runs) {
		t.Fatalf("results.json: version %d, %d runs; want %d, %d", back.Version, len(back.Runs), bench.ResultsVersion, len(r.Runs))
	}
	for i := range r.Runs {
		if !reflect.DeepEqual(back.Runs[i].Figures, r.Runs[i].Figures) {
			t.Errorf("run %d: figures read back %+v, wrote %+v", i, back.Runs[i].Figures, r.Runs[i].Figures)
		}
	}

	// results.csv: one row a run, an empty cell for what was not measured.
	rows := readCSV(t, filepath.Join(dir, "results.csv"))
	if len(rows) != len(r.Runs)+1 {
		t.Fatalf("results.csv has %d rows, want %d", len(rows), len(r.Runs)+1)
	}
	h := rows[0]
	for _, m := range bench.Metrics {
		col(t, h, m.Key)
	}
	unfired := 0
	for i, row := range rows[1:] {
		run := r.Runs[i]
		if row[col(t, h, "contestant")] != run.Contestant || row[col(t, h, "correct")] != map[bool]string{true: "true", false: "false"}[run.Correct] {
			t.Errorf("results.csv row %d = %v, for run %s", i+1, row, run.RunName())
		}
		if !run.FaultFired() {
			unfired++
			if row[col(t, h, "detect_ms")] != "" || row[col(t, h, "recovered_ms")] != "" {
				t.Errorf("unfired run %s has a bill in results.csv: %v", run.RunName(), row)
			}
		} else if row[col(t, h, "detect_ms")] != "500" || row[col(t, h, "modelled")] != "detect;acquire" {
			t.Errorf("run %s: detect_ms %q modelled %q, want 500 and detect;acquire", run.RunName(),
				row[col(t, h, "detect_ms")], row[col(t, h, "modelled")])
		}
	}
	if unfired != 1 {
		t.Errorf("%d unfired runs in the fixture, want 1", unfired)
	}

	// timeline.csv: one row per run × bucket, latency empty while down.
	rows = readCSV(t, filepath.Join(dir, "timeline.csv"))
	buckets := 0
	for _, run := range r.Runs {
		buckets += len(run.Series.Buckets)
	}
	if len(rows) != buckets+1 {
		t.Fatalf("timeline.csv has %d rows, want %d", len(rows), buckets+1)
	}
	first := r.Runs[0].Series.Buckets[0]
	if got := rows[1][:9]; got[0] != r.Runs[0].Contestant || got[3] != "0" || got[4] != itoa(first.Offered) || got[7] != itoa(first.Lag) {
		t.Errorf("timeline.csv first row %v, want %s's first bucket %+v", rows[1], r.Runs[0].Contestant, first)
	}
	empty := 0
	for _, row := range rows[1:] {
		if row[col(t, rows[0], "latency_p99_ms")] == "" {
			empty++
		}
	}
	if empty == 0 {
		t.Error("no bucket without latency: the outage should have some")
	}

	// timeline_events.csv: the events, and five phase rows per crash.
	rows = readCSV(t, filepath.Join(dir, "timeline_events.csv"))
	phases, points := 0, 0
	for _, row := range rows[1:] {
		switch row[4] {
		case "phase":
			phases++
		case "checkpoint", "batch", "finite job":
			points++
		}
	}
	if want := 5 * (len(r.Runs) - 1); phases != want {
		t.Errorf("%d phase rows, want %d", phases, want)
	}
	if points == 0 {
		t.Error("no recovery point in timeline_events.csv")
	}

	// The pictures decode; the page inlines each and fetches nothing.
	for _, p := range paths {
		if strings.HasSuffix(p, ".png") {
			fh, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.Decode(fh); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			fh.Close()
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("report.html inlines %d SVGs, want 4", n)
	}
	for _, want := range append(r.Order, "How to read this", "never fired", "GOMAXPROCS 2", "file",
		"12 rows missing", "not in steady state", "detect (modelled)", "repeat 2 of 3") {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "could not be shown") {
		t.Error("the page refused a figure")
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`).FindString(page); m != "" {
		t.Errorf("report.html fetches %q", m)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
