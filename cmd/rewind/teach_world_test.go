package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime/diagram"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// What the tests of the five lessons of this helper share: running a
// lesson through the CLI and checking its runs while they are on disk.

// worldLesson runs `rewind trace --teach name --seed S` with a test seed
// and hands the lesson's verdict to check while its runs' files still
// exist. It fails unless the command exits 0 saying "as predicted"; a
// failure names the seed and the command that replays it.
func worldLesson(t *testing.T, name string, check func(v *verdict), extra ...string) (stdout string) {
	t.Helper()
	seed := int64(testseed.Seed(t) >> 2)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: REWIND_TEST_SEED=%d go test -race -count=1 -run '^%s$' ./cmd/rewind/  (or: rewind trace --teach %s --seed %d %s)",
				uint64(seed)<<2, t.Name(), name, seed, strings.Join(extra, " "))
		}
	})
	var seen *verdict
	sawVerdict = func(v *verdict) {
		seen = v
		check(v)
	}
	defer func() { sawVerdict = nil }()
	code, stdout, stderr := rewind(t, append([]string{"trace", "--teach", name, "--seed", fmt.Sprint(seed)}, extra...)...)
	if seen == nil {
		t.Fatalf("trace --teach %s reached no verdict: exit %d: %s", name, code, stderr)
	}
	if code != 0 || !saysAsPredicted(stdout) {
		t.Fatalf("trace --teach %s: exit %d, want 0 and the lesson holding:\n%s\n%s", name, code, stdout, stderr)
	}
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if n := len([]rune(l)); n > traceWidth {
			t.Errorf("a line of %d columns, over %d: %q", n, traceWidth, l)
		}
	}
	return stdout
}

// referenceOf is the reference executor's result on run's input, run
// afresh (not the lesson's own reference).
func referenceOf(t *testing.T, tr *traced, inputs map[string]string) *sink.Table {
	t.Helper()
	cfg := tr.cfg
	cfg.Inputs = inputs
	ref := referenceExecutor()
	cfg.Executor, cfg.Options, cfg.Fails, cfg.Storage = ref.Name(), nil, nil, ""
	cfg.Output = filepath.Join(t.TempDir(), "ref")
	got, err := runTraced(context.Background(), ref, cfg, nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return got.result
}

// equalsReference fails unless tr's result is the reference's on its own
// input.
func equalsReference(t *testing.T, what string, tr *traced) {
	t.Helper()
	if d := tr.result.Diff(referenceOf(t, tr, tr.cfg.Inputs), 5); d != "" {
		t.Errorf("%s differs from the reference:\n%s", what, d)
	}
}

// inputRows are the records [from, to) of partition p of spec, by id:
// key and value, read straight from the source.
func inputRows(t *testing.T, spec string, p int, from, to int64) map[int64][2]int64 {
	t.Helper()
	src, err := source.Open(spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	rd, err := src.Open(context.Background(), p, source.Position{Partition: src.Partitions()[p], Offset: from}, memory.NewGoAllocator())
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	out := map[int64][2]int64{}
	for off := from; off < to; {
		b, _, err := rd.Next(context.Background(), int(min(to-off, 1<<20)))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		id := b.Column(source.IdxID).(*array.Int64)
		key := b.Column(source.IdxKey).(*array.Int64)
		val := b.Column(source.IdxValue).(*array.Int64)
		for i := 0; i < int(b.NumRows()); i++ {
			out[id.Value(i)] = [2]int64{key.Value(i), val.Value(i)}
		}
		off += b.NumRows()
		b.Release()
	}
	return out
}

// idCopies counts, per id, the rows holding it over every visible file of
// an etl output, each file resolved on its own.
func idCopies(t *testing.T, tr *traced) map[int64]int {
	t.Helper()
	entries, err := os.ReadDir(tr.cfg.Output)
	if err != nil {
		t.Fatal(err)
	}
	j, err := job.Build(tr.cfg.Job, tr.cfg.Params)
	if err != nil {
		t.Fatal(err)
	}
	copies := map[int64]int{}
	files := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "_") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		dir := t.TempDir()
		if err := os.Link(filepath.Join(tr.cfg.Output, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
		table, _, err := sink.Resolve(dir, j.Output)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := rowIDs(table)
		if err != nil {
			t.Fatal(err)
		}
		for id := range ids {
			copies[id]++
		}
		files++
	}
	if files == 0 {
		t.Fatalf("no visible file in %s", tr.cfg.Output)
	}
	return copies
}

// The list of lessons fits 80 columns, one line a lesson.
func TestTeachListFits(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--teach", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != len(lessons) {
		t.Errorf("%d lines for %d lessons:\n%s", len(lines), len(lessons), stdout)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > traceWidth {
			t.Errorf("a line of %d columns, over %d: %q", n, traceWidth, l)
		}
	}
}

// A lesson's JSON carries each run's diagram as trace --format json
// writes it: it reads back, its times in microseconds within the run.
func TestTeachJSONCarriesTheDiagrams(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--teach", "append-after-replay", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Holds    bool `json:"holds"`
		WrongRun struct {
			Steps []json.RawMessage `json:"mistake_steps"`
			Trace json.RawMessage   `json:"trace"`
		} `json:"wrong_run"`
		RightRun struct {
			Trace json.RawMessage `json:"trace"`
		} `json:"right_run"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("the lesson's JSON does not read: %v\n%s", err, stdout)
	}
	if !out.Holds || len(out.WrongRun.Steps) == 0 {
		t.Errorf("holds %v with %d steps, want the lesson holding with its steps", out.Holds, len(out.WrongRun.Steps))
	}
	for name, raw := range map[string]json.RawMessage{"wrong": out.WrongRun.Trace, "right": out.RightRun.Trace} {
		rec, err := diagram.ReadJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("the %s run's diagram: %v", name, err)
		}
		if len(rec.Lanes) == 0 || len(rec.Events) == 0 {
			t.Fatalf("the %s run's diagram has %d lanes and %d events", name, len(rec.Lanes), len(rec.Events))
		}
		// trace's input lasts about 400 ms: a time read in the wrong unit
		// is 1000 times off.
		for _, e := range rec.Events {
			if e.T < 0 || e.T > time.Minute {
				t.Fatalf("the %s run's diagram has an event at %s: not microseconds", name, e.T)
			}
		}
	}
}

// A lesson about a crash refuses --fail none, and one about a job's
// output refuses a job whose rows do not name records.
func TestTeachRefusesWhatItCannotShow(t *testing.T) {
	for _, args := range [][]string{
		{"--teach", "forgetful-source", "--fail", "none"},
		{"--teach", "append-after-replay", "--job", "windowed-sum"},
		{"--teach", "wall-clock", "--job", "etl"},
		{"--teach", "marker-in-microbatch", "--executor", "recordwise"},
	} {
		code, _, stderr := rewind(t, append([]string{"trace"}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || !strings.Contains(stderr, "invalid --") {
			t.Errorf("trace %s: exit %d, want 2 with one line naming the flag: %s", strings.Join(args, " "), code, stderr)
		}
	}
}
