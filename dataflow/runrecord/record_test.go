package runrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// testRecord is the record of a run of keyed-count on microbatch.
func testRecord() Record {
	return Record{RunID: "r-1", Executor: "microbatch", Job: "keyed-count", Params: job.DefaultParams,
		Inputs: map[string]string{"in": "gen:records=10"}, SinkMode: string(sink.Transactional),
		OutputFormat: string(sink.Parquet), Storage: "file:///st", Started: time.Now().UTC()}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty directory: got %v, want ErrNotFound", err)
	}
	rec := testRecord()
	if err := Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != "r-1" || got.Executor != "microbatch" || got.Inputs["in"] != "gen:records=10" {
		t.Fatalf("read back %+v", got)
	}
	if d := got.Differences(rec); len(d) != 0 {
		t.Fatalf("the record read back differs from the one written: %v", d)
	}
	// Only the record is left: no temporary file beside it.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != FileName {
		t.Fatalf("directory holds %v, want only %s", entries, FileName)
	}
}

func TestDamagedIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(dir)
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), filepath.Join(dir, FileName)+" is damaged") {
		t.Fatalf("damaged record: got %v", err)
	}
}

// Every single flipped byte of a record is reported as damage, naming the
// file, and never read as a record with another value in it (which the
// resume check would report as a flag that differs).
func TestFlippedByteIsDamaged(t *testing.T) {
	dir := t.TempDir()
	rec := testRecord()
	rec.Params.MaxDisorder = 250
	if err := Write(dir, rec); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
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
			r, err := Read(dir)
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("byte %d (%q) ^ %#x: got record %+v, error %v; want ErrDamaged", i, good[i], mask, r, err)
			}
			if !strings.HasPrefix(err.Error(), "run record "+path+" is damaged (") {
				t.Fatalf("byte %d ^ %#x: error %q does not name the file as damaged", i, mask, err)
			}
		}
	}
	// A torn record (any prefix short of the closing brace) is damage too.
	for n := range bytes.LastIndexByte(good, '}') {
		if _, err := Decode(good[:n]); !errors.Is(err, ErrDamaged) {
			t.Fatalf("first %d bytes: got %v, want ErrDamaged", n, err)
		}
	}
}

// A record written before records carried a checksum is still read, so a
// run an older rewind started can be resumed.
func TestOlderPlainFormatIsRead(t *testing.T) {
	rec := testRecord()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.RunID != rec.RunID || len(got.Differences(rec)) != 0 {
		t.Fatalf("older record read back as %+v", got)
	}
	if _, err := Decode([]byte(`{"executor":"microbatch"}`)); !errors.Is(err, ErrDamaged) {
		t.Fatalf("a plain object without a run id: got %v, want ErrDamaged", err)
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"20260102T030405Z-0a1b2c3d": true, "a_b-9": true, "": false, "a/b": false, "../x": false,
		"a.b": false, "a b": false, strings.Repeat("x", 129): false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}
