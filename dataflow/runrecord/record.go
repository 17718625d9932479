// Package runrecord is the run record: the checksummed file in an output
// directory that names the run writing it, so a --resume can check it
// continues that run, with the same inputs and job.
package runrecord

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// FileName is the file in an output directory that names the run writing
// it. It starts with "_", so resolution never reads it as data.
//
// Resuming a run needs more than its recovery points in durable storage:
// rows the run emitted before its newest recovery point sit in the output
// directory (published files, staged epochs, the idempotent store) and are
// not produced again. So a run may only be resumed into the directory it
// was writing, with the inputs and job it started with; the record is how
// `rewind run --resume` checks both.
const FileName = "_rewind-run.json"

// Record is what FileName holds.
type Record struct {
	RunID        string            `json:"run_id"`
	Executor     string            `json:"executor"`
	Job          string            `json:"job"`
	Params       job.Params        `json:"params"`
	Inputs       map[string]string `json:"inputs"`
	SinkMode     string            `json:"sink_mode"`
	OutputFormat string            `json:"output_format"`
	// Seed is --seed: the seed of every gen: or push: input that names
	// none.
	Seed        int64 `json:"seed"`
	Parallelism int   `json:"parallelism"`
	// Fixed are the executor's settings a resumed run must keep (flag and
	// value, run.Options.Fixed): a disk-phase run's units are cut from its
	// parallelism and finite-job range.
	Fixed map[string]string `json:"fixed,omitempty"`
	// Storage is the canonical URL of the run's durable storage, and
	// S3Endpoint the endpoint it was reached at (s3:// only).
	Storage    string    `json:"storage"`
	S3Endpoint string    `json:"s3_endpoint,omitempty"`
	Started    time.Time `json:"started"`
	// Finished is set once the run has read its whole bounded input and
	// completed its output: there is nothing left to resume.
	Finished *time.Time `json:"finished,omitempty"`
}

// Differences lists, as flag names with both values, where a run recorded
// as now (the record of the run a --resume would start) would not continue
// the run r records: what the output is made of may not change (job,
// inputs, --seed, job parameters, sink mode, format), nor the settings the
// executor's options call fixed (Record.Fixed: what a disk-phase run cut
// its units from). Anything else may change, the parallelism and timing
// flags of the other executors among it; recordwise refuses a parallelism
// change itself when the recovery point holds in-flight data.
// Storage is compared apart, once it is open, by its canonical URL
// (Store.URL): "st", "./st" and "file://st" are one place, and a relative
// path from another directory is not.
func (r Record) Differences(now Record) []string {
	var out []string
	diff := func(flag, was, now string) {
		if was != now {
			out = append(out, fmt.Sprintf("%s was %q, now %q", flag, was, now))
		}
	}
	diff("--executor", r.Executor, now.Executor)
	diff("--job", r.Job, now.Job)
	if !maps.Equal(r.Inputs, now.Inputs) {
		out = append(out, fmt.Sprintf("--input was %s, now %s", inputsText(r.Inputs), inputsText(now.Inputs)))
	}
	diff("--seed", fmt.Sprint(r.Seed), fmt.Sprint(now.Seed))
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	diff("--window", ms(r.Params.Window), ms(now.Params.Window))
	diff("--join-window", ms(r.Params.JoinWindow), ms(now.Params.JoinWindow))
	diff("--max-disorder", ms(r.Params.MaxDisorder), ms(now.Params.MaxDisorder))
	diff("--sink-mode", r.SinkMode, now.SinkMode)
	diff("--output-format", r.OutputFormat, now.OutputFormat)
	if r.Executor == now.Executor {
		// A setting recorded but no longer fixed, or fixed now but not
		// recorded (a record of an older rewind), differs too: the
		// recovery points may have been cut from it.
		union := maps.Clone(now.Fixed)
		if union == nil {
			union = map[string]string{}
		}
		maps.Copy(union, r.Fixed)
		flags := slices.Sorted(maps.Keys(union))
		for _, flag := range flags {
			diff(flag, r.Fixed[flag], now.Fixed[flag])
		}
	}
	return out
}

func inputsText(in map[string]string) string {
	parts := make([]string, 0, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		parts = append(parts, name+"="+in[name])
	}
	return strings.Join(parts, " ")
}

// ErrNotFound is Read's error for a directory without one.
var ErrNotFound = errors.New("no run record")

// ErrDamaged is what the errors of Decode and
// Read wrap for a record whose bytes are not what was written: a
// torn write, a flipped bit, a hand edit.
var ErrDamaged = errors.New("run record damaged")

// damaged is a Decode error: why the bytes are not a record.
type damaged struct{ why string }

func (d damaged) Error() string     { return "run record damaged (" + d.why + ")" }
func (d damaged) Is(err error) bool { return err == ErrDamaged }

func damagedf(format string, args ...any) error { return damaged{fmt.Sprintf(format, args...)} }

// runRecordFile is what FileName holds: the record, and the SHA-256
// of its compact JSON (the bytes without insignificant whitespace, so the
// file can be indented). The record stays readable (jq .record), and any
// change to it is caught before one of its values is compared with a flag.
type runRecordFile struct {
	Checksum string          `json:"checksum"`
	Record   json.RawMessage `json:"record"`
}

const checksumPrefix = "sha256:"

func recordChecksum(b []byte) string {
	sum := sha256.Sum256(b)
	return checksumPrefix + hex.EncodeToString(sum[:])
}

// Encode is the content of FileName for r.
func Encode(r Record) ([]byte, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(runRecordFile{Checksum: recordChecksum(body), Record: body}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Decode parses the content of FileName. A record written
// before records carried a checksum (a plain Record object) is still
// read, unverified, so a run started by an older rewind can be resumed.
// Anything else that does not verify is ErrDamaged.
func Decode(b []byte) (Record, error) {
	var r Record
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return r, damagedf("not JSON: %v", err)
	}
	_, hasSum := top["checksum"]
	_, hasRec := top["record"]
	if !hasSum && !hasRec {
		// The older form: the record itself, without a checksum.
		if err := json.Unmarshal(b, &r); err != nil || r.RunID == "" {
			return Record{}, damagedf("neither a checksummed record nor an older plain one")
		}
		return r, nil
	}
	var f runRecordFile
	if err := json.Unmarshal(b, &f); err != nil {
		return r, damagedf("%v", err)
	}
	if !hasSum || !hasRec || len(top) != 2 {
		return r, damagedf("want exactly the fields checksum and record")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, f.Record); err != nil {
		return r, damagedf("%v", err)
	}
	if got := recordChecksum(compact.Bytes()); got != f.Checksum {
		return r, damagedf("checksum %s, the content's is %s", short(f.Checksum), short(got))
	}
	if err := json.Unmarshal(f.Record, &r); err != nil || r.RunID == "" {
		return Record{}, damagedf("checksum matches, but the record holds no run id")
	}
	return r, nil
}

// short cuts a checksum to what a person compares by eye.
func short(sum string) string {
	if len(sum) > len(checksumPrefix)+12 {
		return sum[:len(checksumPrefix)+12] + "…"
	}
	return strconv.Quote(sum)
}

// Read reads the record of the run that writes dir. A damaged
// record is an error wrapping ErrDamaged that names the file and
// what to do.
func Read(dir string) (Record, error) {
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, err
	}
	r, err := Decode(b)
	var d damaged
	if errors.As(err, &d) {
		return Record{}, DamagedError{Path: path, Why: d.why}
	}
	if err != nil {
		return Record{}, err
	}
	return r, nil
}

// DamagedError is Read's error for a damaged record: it names
// the file, says what is wrong and what to do, and wraps
// ErrDamaged.
type DamagedError struct{ Path, Why string }

func (e DamagedError) Error() string {
	return fmt.Sprintf("run record %s is damaged (%s): it no longer says which run the output belongs to, so the run cannot be resumed; --overwrite starts a new run there", e.Path, e.Why)
}
func (e DamagedError) Is(err error) bool { return err == ErrDamaged }

// Write writes r into dir, atomically: a reader (or a resume after
// a crash) sees the whole record or none.
func Write(dir string, r Record) error {
	b, err := Encode(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".rewind-run-*")
	if err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, FileName))
	}
	if err == nil {
		err = storage.SyncDir(dir) // the rename itself must survive a power loss
	}
	if err != nil {
		return fmt.Errorf("writing run record: %w", err)
	}
	return nil
}

// ValidID reports whether id can name a run in every executor's storage
// layout: letters, digits, '_' and '-'.
func ValidID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
