package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestTextSummaryBillsAndHistory: the text summary bills every crash,
// marking modelled parts and printing "-" for what was not measured, and
// lists the newest recovery points of every kind, the reason of a failed
// one after its status, "-" for a figure a kind does not have. No line is
// wider than TextWidth, however long a cause or reason.
func TestTextSummaryBillsAndHistory(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	s := &Summary{Job: "keyed-count", Executor: "x", SinkMode: "append", OutputFormat: "parquet", Output: "/out",
		Crashes: 2,
		Recoveries: []Recovery{
			{Cause: "worker 1 killed after 500 records", AtMs: f(120.5), DetectMs: f(50), AcquireMs: f(200),
				Modelled: []string{"detect", "acquire"}, RestoreMs: f(3.25), RestoreBytes: n(4096),
				ReprocessedRecords: n(300), ReprocessMs: f(12), CatchUpMs: f(40), RecoveredMs: f(293.25)},
			{Cause: "coordinator killed " + strings.Repeat("and a very long cause ", 8), AtMs: f(900), DetectMs: f(1.5),
				RestoreMs: f(2)},
		},
		History: &ProgressHistory{Counts: map[string]int{"checkpoint": 3, "batch": 1, "job_committed": 1},
			Recent: map[string][]json.RawMessage{
				"checkpoint": {
					json.RawMessage(`{"executor":"x","event":"checkpoint","t_ms":100,"id":1,"status":"completed","duration_ms":4.5,"state_bytes":2048,"in_flight_bytes":0,"max_alignment_ms":1.25}`),
					json.RawMessage(`{"executor":"x","event":"checkpoint","t_ms":300,"id":2,"status":"failed","reason":"cut short by a crash` + strings.Repeat(", still explaining", 6) + `","duration_ms":7,"state_bytes":0,"in_flight_bytes":512,"max_alignment_ms":0}`),
				},
				"batch":         {json.RawMessage(`{"executor":"y","event":"batch","t_ms":200,"batch_id":4,"durations_ms":{"total":9.5},"state_bytes":100}`)},
				"job_committed": {json.RawMessage(`{"executor":"z","event":"job_committed","t_ms":400,"job":0,"bytes_materialised":77}`)},
			}},
	}
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for i, line := range strings.Split(got, "\n") {
		if len([]rune(line)) > TextWidth {
			t.Errorf("line %d is %d columns, more than %d: %q", i+1, len([]rune(line)), TextWidth, line)
		}
	}
	golden := filepath.Join("testdata", "summary_text.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("text summary differs from %s (go test -run %s -update rewrites it):\n got:\n%s\nwant:\n%s", golden, t.Name(), got, want)
	}
}
