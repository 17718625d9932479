package run

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	if err := WriteRunRecord(dir, RecordOf(cfg, "file:///st", "")); err != nil {
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
	// Parallelism and settings the options do not fix may change on a
	// resume.
	cfg.Parallelism, cfg.Options = 7, cutOptions{interval: 3}
	if d := got.Differences(cfg); len(d) != 0 {
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
	if !errors.Is(err, ErrRunRecordDamaged) || !strings.Contains(err.Error(), filepath.Join(dir, RunRecordName)+" is damaged") {
		t.Fatalf("damaged record: got %v", err)
	}
}

// Every single flipped byte of a record is reported as damage, naming the
// file, and never read as a record with another value in it (which the
// resume check would report as a flag that differs).
func TestRunRecordFlippedByteIsDamaged(t *testing.T) {
	dir := t.TempDir()
	cfg := resumeConfig()
	cfg.Params.MaxDisorder = 250
	if err := WriteRunRecord(dir, RecordOf(cfg, "file:///st", "")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, RunRecordName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for _, mask := range []byte{0x01, 0x20, 0x80} {
			b := append([]byte(nil), good...)
			b[i] ^= mask
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := ReadRunRecord(dir)
			if !errors.Is(err, ErrRunRecordDamaged) {
				t.Fatalf("byte %d (%q) ^ %#x: got record %+v, error %v; want ErrRunRecordDamaged", i, good[i], mask, r, err)
			}
			if !strings.HasPrefix(err.Error(), "run record "+path+" is damaged (") {
				t.Fatalf("byte %d ^ %#x: error %q does not name the file as damaged", i, mask, err)
			}
		}
	}
	// A torn record (any prefix short of the closing brace) is damage too.
	for n := range bytes.LastIndexByte(good, '}') {
		if _, err := DecodeRunRecord(good[:n]); !errors.Is(err, ErrRunRecordDamaged) {
			t.Fatalf("first %d bytes: got %v, want ErrRunRecordDamaged", n, err)
		}
	}
}

// A record written before records carried a checksum is still read, so a
// run an older rewind started can be resumed.
func TestRunRecordOlderPlainFormatIsRead(t *testing.T) {
	rec := RecordOf(resumeConfig(), "file:///st", "")
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRunRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != rec.RunID || len(got.Differences(resumeConfig())) != 0 {
		t.Fatalf("older record read back as %+v", got)
	}
	if _, err := DecodeRunRecord([]byte(`{"executor":"microbatch"}`)); !errors.Is(err, ErrRunRecordDamaged) {
		t.Fatalf("a plain object without a run id: got %v, want ErrRunRecordDamaged", err)
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

// cutOptions are the options of an executor that cuts its work from the
// parallelism and its --units (like diskphase), which a resume must keep.
type cutOptions struct {
	units    int
	interval int // not fixed
	fixed    bool
}

func (cutOptions) Variant() string              { return "" }
func (o cutOptions) WithVariant(string) Options { return o }
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
		if d := rec.Differences(c); len(d) != 1 || !strings.HasPrefix(d[0], flag+" was ") {
			t.Errorf("changing %s: differences %q, want one naming %s", flag, d, flag)
		}
	}
	// A record written without them (an older rewind's) differs in each.
	old := rec
	old.Fixed = nil
	if d := old.Differences(cfg); len(d) != 2 {
		t.Errorf("a record without the fixed settings: differences %q, want --parallelism and --units", d)
	}
	// Options that fix nothing may rescale on a resume.
	mb := resumeConfig()
	mb.Parallelism, mb.Options = 2, cutOptions{units: 4000}
	rec = RecordOf(mb, "file:///st", "")
	mb.Parallelism = 3
	if d := rec.Differences(mb); len(d) != 0 {
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
	if d := rec.Differences(cfg); len(d) != 0 {
		t.Fatalf("the same relative path from the same directory differs: %v", d)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	if d := rec.Differences(cfg); len(d) != 1 || !strings.HasPrefix(d[0], "--input was ") {
		t.Fatalf("the same relative path from another directory: differences %q, want --input", d)
	}
}

func TestOutputLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	unlock, err := LockOutput(dir)
	if err != nil {
		t.Fatal(err)
	}
	if busy, err := OutputInUse(dir); err != nil || busy {
		t.Fatalf("a directory holding only the lock: in use %v, %v; want not in use", busy, err)
	}
	// flock locks belong to the open file, so a second open in this process
	// conflicts as another process would.
	if _, err := LockOutput(dir); !errors.Is(err, ErrOutputLocked) {
		t.Fatalf("second lock: %v, want ErrOutputLocked", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "part-0.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ClearOutput(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, OutputLockName)); err != nil {
		t.Fatalf("ClearOutput removed the lock file: %v", err)
	}
	unlock()
	again, err := LockOutput(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
