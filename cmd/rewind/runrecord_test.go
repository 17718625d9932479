package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/runrecord"
)

// A flipped byte in the run record is reported as damage to that file
// (exit 1), not as a flag that differs from a value nobody typed.
func TestResumeWithDamagedRunRecordNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	out, store := filepath.Join(dir, "out"), "file://"+filepath.Join(dir, "store")
	args := []string{"run", "--executor", "microbatch", "--job", "keyed-count", "--input", "gen:records=2000,keys=40,seed=5",
		"--output", out, "--storage", store, "--max-disorder", "5ms"}
	// The run finishes; its record is then rewritten as unfinished, which
	// is what a process that died leaves, before one byte is flipped.
	if code, _, stderr := rewind(t, args...); code != 0 {
		t.Fatalf("the recorded run: exit %d: %s", code, stderr)
	}
	rec, err := runrecord.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	rec.Finished = nil
	if err := runrecord.Write(out, rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, runrecord.FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("records=2000"))
	if i < 0 {
		t.Fatalf("the record does not hold the input spec:\n%s", b)
	}
	b[i+3] ^= 0x01 // "records" becomes "rebords"
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := rewind(t, append(args, "--resume")...)
	want := "rewind: run record " + path + " is damaged (checksum "
	if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Fatalf("resume over a flipped byte: exit %d, stderr %q; want exit 1 and one line starting %q", code, stderr, want)
	}
}

// A run record deleted from an output directory that still holds the run's
// files is damage (exit 1, naming the file), not a usage error: the user
// gave the right --output.
func TestResumeWithDeletedRunRecordNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	out, store := filepath.Join(dir, "out"), "file://"+filepath.Join(dir, "store")
	args := []string{"run", "--executor", "microbatch", "--job", "keyed-count", "--input", "gen:records=2000,keys=40,seed=5",
		"--output", out, "--storage", store, "--max-disorder", "5ms"}
	if code, _, stderr := rewind(t, args...); code != 0 {
		t.Fatalf("the recorded run: exit %d: %s", code, stderr)
	}
	path := filepath.Join(out, runrecord.FileName)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := rewind(t, append(args, "--resume")...)
	want := "rewind: run record " + path + " is missing, yet " + out + " holds a run's output"
	if code != exitFailure || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Fatalf("resume after the record was deleted: exit %d, stderr %q; want exit 1 and one line starting %q", code, stderr, want)
	}
}
