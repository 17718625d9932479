package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func resumeConfig() Config {
	return Config{Job: "keyed-count", Executor: "microbatch", Params: job.DefaultParams,
		Inputs: map[string]string{"in": "gen:records=10"}, SinkMode: sink.Transactional,
		OutputFormat: sink.Parquet, Storage: "file://st", RunID: "r-1"}
}

func TestRunRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := runrecord.Read(dir); !errors.Is(err, runrecord.ErrNotFound) {
		t.Fatalf("empty directory: got %v, want runrecord.ErrNotFound", err)
	}
	cfg := resumeConfig()
	if err := runrecord.Write(dir, RecordOf(cfg, "file:///st", "")); err != nil {
		t.Fatal(err)
	}
	got, err := runrecord.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != "r-1" || got.Executor != "microbatch" || got.Inputs["in"] != "gen:records=10" {
		t.Fatalf("read back %+v", got)
	}
	if d := got.Differences(RecordOf(cfg, "", "")); len(d) != 0 {
		t.Fatalf("the same config differs: %v", d)
	}
	// Only the record is left: no temporary file beside it.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != runrecord.FileName {
		t.Fatalf("directory holds %v, want only %s", entries, runrecord.FileName)
	}
	// Parallelism and settings the options do not fix may change on a
	// resume.
	cfg.Parallelism, cfg.Options = 7, cutOptions{interval: 3}
	if d := got.Differences(RecordOf(cfg, "", "")); len(d) != 0 {
		t.Fatalf("parallelism and an unfixed setting must not count as differences: %v", d)
	}
}

func TestRunRecordDifferencesNameTheFlag(t *testing.T) {
	rec := RecordOf(resumeConfig(), "file:///st", "")
	for flag, change := range map[string]func(*Config){
		"--executor":      func(c *Config) { c.Executor = "recordwise" },
		"--job":           func(c *Config) { c.Job = "etl" },
		"--input":         func(c *Config) { c.Inputs = map[string]string{"in": "gen:records=11"} },
		"--window":        func(c *Config) { c.Params.Window++ },
		"--join-window":   func(c *Config) { c.Params.JoinWindow++ },
		"--max-disorder":  func(c *Config) { c.Params.MaxDisorder++ },
		"--sink-mode":     func(c *Config) { c.SinkMode = sink.Append },
		"--output-format": func(c *Config) { c.OutputFormat = sink.CSV },
		"--seed":          func(c *Config) { c.Seed++ },
	} {
		cfg := resumeConfig()
		change(&cfg)
		d := rec.Differences(RecordOf(cfg, "", ""))
		if len(d) != 1 || !strings.HasPrefix(d[0], flag+" was ") {
			t.Errorf("changing %s: differences %q, want one naming %s", flag, d, flag)
		}
	}
}

// cutOptions are the options of an executor that cuts its work from the
// parallelism and its --units (like diskphase), which a resume must keep.
type cutOptions struct {
	units    int
	interval int // not fixed
	fixed    bool
}

func (cutOptions) Variant() string                     { return "" }
func (o cutOptions) WithVariant(string) Options        { return o }
func (cutOptions) Cadence() time.Duration              { return 0 }
func (o cutOptions) WithCadence(time.Duration) Options { return o }
func (o cutOptions) Fixed(cfg Config) map[string]string {
	if !o.fixed {
		return nil
	}
	return map[string]string{"--parallelism": fmt.Sprint(cfg.Parallelism), "--units": fmt.Sprint(o.units)}
}

func TestRunRecordKeepsWhatTheOptionsFix(t *testing.T) {
	cfg := resumeConfig()
	cfg.Parallelism, cfg.Options = 2, cutOptions{units: 4000, fixed: true}
	rec := RecordOf(cfg, "file:///st", "")
	for flag, change := range map[string]func(*Config){
		"--parallelism": func(c *Config) { c.Parallelism = 3 },
		"--units":       func(c *Config) { c.Options = cutOptions{units: 2000, fixed: true} },
	} {
		c := cfg
		change(&c)
		if d := rec.Differences(RecordOf(c, "", "")); len(d) != 1 || !strings.HasPrefix(d[0], flag+" was ") {
			t.Errorf("changing %s: differences %q, want one naming %s", flag, d, flag)
		}
	}
	// A record written without them (an older rewind's) differs in each.
	old := rec
	old.Fixed = nil
	if d := old.Differences(RecordOf(cfg, "", "")); len(d) != 2 {
		t.Errorf("a record without the fixed settings: differences %q, want --parallelism and --units", d)
	}
	// Options that fix nothing may rescale on a resume.
	mb := resumeConfig()
	mb.Parallelism, mb.Options = 2, cutOptions{units: 4000}
	rec = RecordOf(mb, "file:///st", "")
	mb.Parallelism = 3
	if d := rec.Differences(RecordOf(mb, "", "")); len(d) != 0 {
		t.Errorf("changing --parallelism: differences %q, want none", d)
	}
}

func TestRunRecordComparesFileInputsByAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	cfg := resumeConfig()
	cfg.Inputs = map[string]string{"in": "file:data"}
	rec := RecordOf(cfg, "file:///st", "")
	if want := "file:" + filepath.Join(dir, "data"); rec.Inputs["in"] != want {
		t.Fatalf("recorded input %q, want %q", rec.Inputs["in"], want)
	}
	if d := rec.Differences(RecordOf(cfg, "", "")); len(d) != 0 {
		t.Fatalf("the same relative path from the same directory differs: %v", d)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if d := rec.Differences(RecordOf(cfg, "", "")); len(d) != 1 || !strings.HasPrefix(d[0], "--input was ") {
		t.Fatalf("the same relative path from another directory: differences %q, want --input", d)
	}
}

func TestNewRunIDIsValid(t *testing.T) {
	if id := NewRunID(); !runrecord.ValidID(id) {
		t.Fatalf("NewRunID() = %q, which runrecord.ValidID refuses", id)
	}
}
