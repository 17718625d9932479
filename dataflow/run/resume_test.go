package run

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func resumeConfig() Config {
	return Config{Job: "keyed-count", Executor: "microbatch", Params: job.DefaultParams,
		Inputs: map[string]string{"in": "gen:records=10"}, SinkMode: sink.Transactional,
		OutputFormat: sink.Parquet, Storage: "file://st", RunID: "r-1"}
}

func TestRunRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadRunRecord(dir); !errors.Is(err, ErrNoRunRecord) {
		t.Fatalf("empty directory: got %v, want ErrNoRunRecord", err)
	}
	cfg := resumeConfig()
	if err := WriteRunRecord(dir, RecordOf(cfg, "file:///st")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRunRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != "r-1" || got.Executor != "microbatch" || got.Inputs["in"] != "gen:records=10" {
		t.Fatalf("read back %+v", got)
	}
	if d := got.Differences(cfg); len(d) != 0 {
		t.Fatalf("the same config differs: %v", d)
	}
	// Only the record is left: no temporary file beside it.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != RunRecordName {
		t.Fatalf("directory holds %v, want only %s", entries, RunRecordName)
	}
	// Parallelism and timing may change on a resume.
	cfg.Parallelism, cfg.Trigger = 7, 3
	if d := got.Differences(cfg); len(d) != 0 {
		t.Fatalf("parallelism and trigger must not count as differences: %v", d)
	}
}

func TestRunRecordDifferencesNameTheFlag(t *testing.T) {
	rec := RecordOf(resumeConfig(), "file:///st")
	for flag, change := range map[string]func(*Config){
		"--executor":      func(c *Config) { c.Executor = "recordwise" },
		"--job":           func(c *Config) { c.Job = "etl" },
		"--input":         func(c *Config) { c.Inputs = map[string]string{"in": "gen:records=11"} },
		"--window":        func(c *Config) { c.Params.Window++ },
		"--join-window":   func(c *Config) { c.Params.JoinWindow++ },
		"--max-disorder":  func(c *Config) { c.Params.MaxDisorder++ },
		"--sink-mode":     func(c *Config) { c.SinkMode = sink.Append },
		"--output-format": func(c *Config) { c.OutputFormat = sink.CSV },
	} {
		cfg := resumeConfig()
		change(&cfg)
		d := rec.Differences(cfg)
		if len(d) != 1 || !strings.HasPrefix(d[0], flag+" was ") {
			t.Errorf("changing %s: differences %q, want one naming %s", flag, d, flag)
		}
	}
}

func TestRunRecordDamagedIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, RunRecordName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadRunRecord(dir)
	if err == nil || errors.Is(err, ErrNoRunRecord) || !strings.Contains(err.Error(), "not a run record") {
		t.Fatalf("damaged record: got %v", err)
	}
}

func TestValidRunID(t *testing.T) {
	for id, want := range map[string]bool{
		NewRunID(): true, "a_b-9": true, "": false, "a/b": false, "../x": false,
		"a.b": false, "a b": false, strings.Repeat("x", 129): false,
	} {
		if got := ValidRunID(id); got != want {
			t.Errorf("ValidRunID(%q) = %v, want %v", id, got, want)
		}
	}
}
