package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

func rewind(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// quickSettings are the flags, per executor, that make a small run take
// several recovery points, batches or finite jobs.
var quickSettings = map[string][]string{
	"microbatch": {"--trigger", "5ms"},
	"recordwise": {"--checkpoint-interval", "5ms"},
	"diskphase":  {"--job-records", "1000"},
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// independentKeyedCount reads the generator directly and counts with a plain
// map: no operator, no sink, nothing shared with the engine's path.
func independentKeyedCount(t *testing.T, spec string) map[int64][2]int64 {
	t.Helper()
	src, err := source.Open(spec, source.Options{DefaultSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := map[int64][2]int64{}
	for i, name := range src.Partitions() {
		r, err := src.Open(context.Background(), i, source.Position{Partition: name}, memory.NewGoAllocator())
		if err != nil {
			t.Fatal(err)
		}
		for {
			b, _, err := r.Next(context.Background(), 10000)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			keys := b.Column(source.IdxKey).(*array.Int64).Int64Values()
			vals := b.Column(source.IdxValue).(*array.Int64).Int64Values()
			for k := range keys {
				if vals[k] >= 0 {
					c := want[keys[k]]
					want[keys[k]] = [2]int64{c[0] + 1, c[1] + vals[k]}
				}
			}
			b.Release()
		}
		r.Close()
	}
	return want
}

func TestRunKeyedCountReferenceEqualsIndependentCount(t *testing.T) {
	for _, format := range []string{"parquet", "csv"} {
		t.Run(format, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			const spec = "gen:records=100000"
			code, stdout, stderr := rewind(t, "run", "--job", "keyed-count", "--executor", "reference",
				"--input", spec, "--output", out, "--output-format", format, "--summary", "json")
			if code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			var s map[string]any
			if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
				t.Fatalf("last stdout line is not one JSON object: %v\n%s", err, stdout)
			}
			// Every field of report.Summary, so a new field cannot go unchecked.
			summaryType := reflect.TypeOf(report.Summary{})
			for i := range summaryType.NumField() {
				field, _, _ := strings.Cut(summaryType.Field(i).Tag.Get("json"), ",")
				if field == "-" { // kept out of the JSON on purpose (Series)
					continue
				}
				if _, ok := s[field]; !ok {
					t.Errorf("summary lacks %q: %s", field, lastLine(stdout))
				}
			}
			for _, field := range []string{"barriers", "checkpoints", "latency_ms"} {
				if s[field] != nil {
					t.Errorf("reference summary: %s = %v, want null (not measured)", field, s[field])
				}
			}
			if s["records_in"] != float64(100000) || s["sink_duplicate_rows"] != float64(0) || s["executor"] != "reference" {
				t.Errorf("summary records_in=%v duplicates=%v executor=%v", s["records_in"], s["sink_duplicate_rows"], s["executor"])
			}
			j, err := job.Build("keyed-count", job.DefaultParams)
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := sink.Resolve(out, j.Output)
			if err != nil {
				t.Fatal(err)
			}
			want := independentKeyedCount(t, spec)
			if len(got.Rows) != len(want) || st.DuplicateRows != 0 {
				t.Fatalf("resolved %d keys (%d duplicates), independent count has %d keys", len(got.Rows), st.DuplicateRows, len(want))
			}
			for _, r := range got.Rows { // key, count, sum, _version
				w, ok := want[r[0]]
				if !ok || r[1] != w[0] || r[2] != w[1] || r[3] != w[0] {
					t.Fatalf("key %d: got count %d sum %d version %d, independent count %v", r[0], r[1], r[2], r[3], w)
				}
			}
			if s["resolved_rows"] != float64(len(want)) {
				t.Errorf("summary resolved_rows %v, want %d", s["resolved_rows"], len(want))
			}
		})
	}
}

func TestInvalidFlagsExitTwoWithOneLine(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]string{
		"allowed are etl":       {"run", "--job", "nope"},
		"allowed are":           {"run", "--executor", "flink"},
		"aligned, unaligned":    {"run", "--barriers", "half"},
		"append, idempotent":    {"run", "--sink-mode", "maybe"},
		"parquet, csv":          {"run", "--output-format", "xml"},
		"1..128":                {"run", "--parallelism", "0"},
		"must be positive":      {"run", "--window", "0s"},
		"0 runs batches back":   {"run", "--executor", "microbatch", "--trigger", "-1s"},
		"text, json":            {"run", "--summary", "yaml"},
		"auto, bar, json, none": {"run", "--progress", "dots"},
		"after-records":         {"run", "--executor", "microbatch", "--fail", "worker=1"},
		"failure-free":          {"run", "--executor", "reference", "--fail", "worker=0,after-records=5"},
		"NAME=SPEC":             {"run", "--job", "join", "--input", "gen:records=5"},
		"also needs payments":   {"run", "--job", "join", "--input", "orders=gen:records=5"},
		"has no input":          {"run", "--input", "left=gen:records=5"},
		"unknown flag":          {"run", "--colour"},
		`invalid --parallelism "two": want a whole number`:  {"run", "--parallelism", "two"},
		`invalid --window "5": want a duration with a unit`: {"run", "--window", "5"},
		`invalid --overwrite "maybe": want true or false`:   {"run", "--overwrite=maybe"},
		"unknown command": {"frobnicate"},
		`--input in=gen:recs=5: unknown parameter "recs"`:               {"run", "--input", "gen:recs=5", "--output", filepath.Join(dir, "o")},
		"whole milliseconds":                                            {"run", "--window", "1500us"},
		"--list-fail-points":                                            {"run", "--executor", "microbatch", "--fail", "point=nowhere"},
		"worker 7 does not exist":                                       {"run", "--executor", "microbatch", "--fail", "worker=7,after-records=5"},
		`unknown point "nowhere"`:                                       {"run", "--executor", "recordwise", "--fail", "worker=1,after-records=5,after-point=nowhere"},
		`at-point=elsewhere,occurrence=1: unknown point "elsewhere"`:    {"run", "--executor", "diskphase", "--fail", "worker=1,at-point=elsewhere"},
		"worker 3 does not exist":                                       {"run", "--executor", "microbatch", "--fail", "worker=3,at-point=batch.after-offsets"},
		"at-point run.mid-finish comes after the executor has returned": {"run", "--fail", "worker=0,at-point=run.mid-finish"},
		"after-records= and at-point= are two triggers":                 {"run", "--fail", "worker=0,at-point=checkpoint.after-metadata,after-records=9"},
		"lineage, rerun-batch":                                          {"run", "--executor", "microbatch", "--lost-piece-recovery", "sometimes"},
	}
	for phrase, args := range cases {
		code, _, stderr := rewind(t, args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != exitUsage || len(lines) != 1 || !strings.Contains(stderr, phrase) {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit 2 and one line containing %q", strings.Join(args, " "), code, stderr, phrase)
		}
	}
}

// TestEveryExecutorMatchesTheReference runs each built-in job through the
// CLI under every executor and compares the resolved output directory with
// the reference executor's, for each sink mode.
func TestEveryExecutorMatchesTheReference(t *testing.T) {
	inputs := map[string][]string{
		"keyed-count":  {"--input", "gen:records=3000,keys=50"},
		"windowed-sum": {"--input", "gen:records=3000,keys=20,disorder=5", "--max-disorder", "5ms", "--window", "100ms"},
		"join": {"--input", "orders=gen:records=1500,keys=300,seed=3", "--input", "payments=gen:records=1500,keys=300,seed=4",
			"--join-window", "50ms"},
		"etl": {"--input", "gen:records=3000"},
	}
	for _, jobName := range job.Names() {
		j, err := job.Build(jobName, job.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceOutput(t, j, inputs[jobName])
		if len(want.Rows) == 0 {
			t.Fatalf("%s: the reference produced no rows; the comparison would prove nothing", jobName)
		}
		for _, exec := range []string{"microbatch", "diskphase", "recordwise"} {
			for _, mode := range []string{"append", "idempotent", "transactional"} {
				out := filepath.Join(t.TempDir(), "out")
				args := append([]string{"run", "--job", jobName, "--executor", exec, "--sink-mode", mode, "--output", out,
					"--storage", "file://" + t.TempDir(), "--summary", "json"}, inputs[jobName]...)
				args = append(args, quickSettings[exec]...)
				code, stdout, stderr := rewind(t, args...)
				if code != 0 {
					t.Errorf("%s on %s/%s: exit %d: %s", jobName, exec, mode, code, stderr)
					continue
				}
				got, st, err := sink.Resolve(out, j.Output)
				if err != nil {
					t.Fatal(err)
				}
				if d := got.Diff(want, 5); d != "" {
					t.Errorf("%s on %s/%s differs from the reference:\n%s", jobName, exec, mode, d)
				}
				var s map[string]any
				if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
					t.Fatalf("%s on %s: summary is not JSON: %v", jobName, exec, err)
				}
				if st.ConflictingRows != 0 || s["sink_conflicting_rows"] != float64(0) {
					t.Errorf("%s on %s/%s: %d conflicting rows", jobName, exec, mode, st.ConflictingRows)
				}
				if s["sink_duplicate_rows"] != float64(st.DuplicateRows) || (mode != "append" && st.DuplicateRows != 0) {
					t.Errorf("%s on %s/%s: summary says %v duplicates, the directory holds %d", jobName, exec, mode, s["sink_duplicate_rows"], st.DuplicateRows)
				}
			}
		}
	}
}

// referenceOutput runs j on the reference executor through the CLI and
// returns its resolved output.
func referenceOutput(t *testing.T, j *job.Job, inputs []string) *sink.Table {
	t.Helper()
	refOut := filepath.Join(t.TempDir(), "ref")
	if code, _, stderr := rewind(t, append([]string{"run", "--job", j.Name, "--executor", "reference", "--output", refOut}, inputs...)...); code != 0 {
		t.Fatalf("%s on reference: exit %d: %s", j.Name, code, stderr)
	}
	want, _, err := sink.Resolve(refOut, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestTraceSaysWhenItsCrashDidNotFire: the crash asked for comes after
// more records than the input holds, so it never fires. The trace is
// printed, and it fails saying why it shows no recovery. (The default
// crash, held back to the first recovery point, fires at that point even
// when it is the final one: TestTraceDefaultCrashFiresAtALatePoint.)
func TestTraceSaysWhenItsCrashDidNotFire(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--input", "gen:records=4000,keys=8,partitions=2", "--fail", "worker=1,after-records=4001")
	if code != exitFailure || !strings.Contains(stderr, "did not fire before the input ended") || !strings.Contains(stdout, "result: equals the reference") {
		t.Fatalf("exit %d, stderr %q; want exit 1 saying the crash did not fire, after the trace:\n%s", code, stderr, stdout)
	}
}

// TestTraceDefaultCrashFiresAtALatePoint: the default crash waits for the
// first checkpoint, which here comes only at the end of the input (the
// interval is longer than the run), when nothing is read any more. It
// fires at that point all the same, and the trace shows the recovery.
func TestTraceDefaultCrashFiresAtALatePoint(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--input", "gen:records=4000,keys=8,partitions=2", "--checkpoint-interval", "1h")
	if code != 0 || !strings.Contains(stdout, "result: equals the reference") || !strings.Contains(stdout, "worker 1 killed") {
		t.Fatalf("exit %d, stderr %q; want a trace of worker 1's kill that equals the reference:\n%s", code, stderr, stdout)
	}
}

// TestAFailThatNeverFiredIsNoted: a crash asked for but never reached must
// not pass silently as a crash-free run.
func TestAFailThatNeverFiredIsNoted(t *testing.T) {
	code, stdout, stderr := rewind(t, "run", "--executor", "microbatch", "--input", "gen:records=500", "--output", filepath.Join(t.TempDir(), "o"),
		"--storage", "file://"+t.TempDir(), "--fail", "worker=1,after-records=100000", "--fail", "worker=0,after-records=100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "--fail worker=1,after-records=100000 did not fire") || strings.Contains(stdout, "worker=0,after-records=100 did not fire") {
		t.Errorf("the summary should note the one crash that did not fire:\n%s", stdout)
	}
	if !strings.Contains(stdout, "crashes 1,") {
		t.Errorf("the crash that fired is not counted:\n%s", stdout)
	}
}

func TestNonEmptyOutputNeedsOverwrite(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	args := []string{"run", "--job", "etl", "--input", "gen:records=100", "--output", out, "--storage", t.TempDir()}
	if code, _, stderr := rewind(t, args...); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	if code, _, stderr := rewind(t, args...); code != exitUsage || !strings.Contains(stderr, "--overwrite") {
		t.Fatalf("second run into the same output: exit %d, %q; want exit 2 mentioning --overwrite", code, stderr)
	}
	if code, _, stderr := rewind(t, append(args, "--overwrite")...); code != 0 {
		t.Fatalf("with --overwrite: exit %d: %s", code, stderr)
	}
}

func TestBadStorageAndInputsAreClearErrorsNotPanics(t *testing.T) {
	dir := t.TempDir()
	aFile := filepath.Join(dir, "afile")
	if err := os.WriteFile(aFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	badCSV := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(badCSV, []byte("id,key,value\n1,2,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := func() string { return filepath.Join(t.TempDir(), "o") }
	cases := []struct {
		args   []string
		code   int
		phrase string
	}{
		{[]string{"run", "--executor", "microbatch", "--storage", "s3://b/p", "--s3-endpoint", "http://127.0.0.1:1", "--output", out()}, exitFailure, "127.0.0.1:1"},
		{[]string{"run", "--executor", "microbatch", "--storage", "s3://", "--output", out()}, exitUsage, "no bucket"},
		{[]string{"run", "--storage", "ftp://x", "--output", out()}, exitUsage, "unsupported scheme"},
		{[]string{"run", "--executor", "diskphase", "--storage", aFile, "--output", out()}, exitUsage, "not a directory"},
		{[]string{"run", "--executor", "reference", "--input", "gen:records=0", "--output", out()}, exitUsage, "bounded"},
		{[]string{"run", "--input", "file:" + badCSV, "--output", out()}, exitUsage, "header"},
		{[]string{"run", "--input", "file:" + filepath.Join(dir, "missing.csv"), "--output", out()}, exitUsage, "missing.csv"},
		{[]string{"inspect", "--storage", filepath.Join(dir, "nope", "deeper")}, exitUsage, "no such file"},
	}
	for _, c := range cases {
		code, _, stderr := rewind(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.phrase) || strings.Contains(stderr, "internal error") {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit %d and a message containing %q", strings.Join(c.args, " "), code, stderr, c.code, c.phrase)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); err == nil {
		t.Error("rewind inspect created the directory it was asked to inspect")
	}
}

// TestInspectShowsRecoveryPointsAndCorruption runs two executors into one
// store, lists their recovery points, then flips a byte in one object:
// --verify must name it, mark its recovery point and exit 1.
func TestInspectShowsRecoveryPointsAndCorruption(t *testing.T) {
	store := t.TempDir()
	for _, exec := range []string{"microbatch", "recordwise"} {
		args := append([]string{"run", "--executor", exec, "--input", "gen:records=4000,keys=30", "--output", filepath.Join(t.TempDir(), "o"),
			"--storage", store}, quickSettings[exec]...)
		if code, _, stderr := rewind(t, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", exec, code, stderr)
		}
	}
	code, stdout, stderr := rewind(t, "inspect", "--storage", store, "--format", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var listing struct {
		RecoveryPoints []struct {
			Executor, Kind string
			Complete       bool
			Objects        int
		} `json:"recovery_points"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &listing); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range listing.RecoveryPoints {
		if !p.Complete || p.Objects == 0 {
			t.Errorf("after a clean run every recovery point is complete: %+v", p)
		}
		seen[p.Executor+"/"+p.Kind] = true
	}
	if !seen["microbatch/batch"] || !seen["recordwise/checkpoint"] {
		t.Fatalf("inspect found %v, want micro-batches and checkpoints", seen)
	}

	st, err := storage.Open(context.Background(), store, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(context.Background(), "microbatch/")
	if err != nil || len(objs) == 0 {
		t.Fatalf("listing: %v, %d objects", err, len(objs))
	}
	victim := objs[0].Name
	raw := st.(storage.RawAccess)
	b, err := raw.RawGet(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := raw.RawPut(context.Background(), victim, b); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = rewind(t, "inspect", "--storage", store, "--verify")
	if code != exitFailure || !strings.Contains(stdout, "1 objects FAIL their checksum") || !strings.Contains(stderr, "1 of") {
		t.Fatalf("inspect --verify after a flipped byte: exit %d\n%s\n%s", code, stdout, stderr)
	}
	code, stdout, _ = rewind(t, "inspect", "--storage", store, "--verify", "--objects")
	if code != exitFailure || !strings.Contains(stdout, victim) || !strings.Contains(stdout, "BAD:") {
		t.Fatalf("inspect --objects --verify does not name %s: exit %d\n%s", victim, code, stdout)
	}
}

// TestLineageCrashThroughTheCLI kills one of three microbatch workers in
// the middle of the third batch of every built-in job, under both
// --lost-piece-recovery modes. The resolved output must equal the
// reference's. Under lineage (the default) the batch is not re-run and
// the records re-read are exactly the inputs of the lost pieces: the
// logged ranges of the partitions the dead worker owned in that batch
// (input partition i lives on worker i mod parallelism), counted here
// from the batch's progress line, not from the executor's piece list.
func TestLineageCrashThroughTheCLI(t *testing.T) {
	inputs := map[string][]string{
		"keyed-count":  {"--input", "gen:records=3000,keys=50,partitions=6"},
		"windowed-sum": {"--input", "gen:records=3000,keys=20,partitions=6", "--window", "100ms"},
		"join": {"--input", "orders=gen:records=1500,keys=300,seed=3,partitions=6", "--input", "payments=gen:records=1500,keys=300,seed=4,partitions=6",
			"--join-window", "50ms"},
		"etl": {"--input", "gen:records=3000,partitions=6"},
	}
	const par = 3
	for _, jobName := range job.Names() {
		j, err := job.Build(jobName, job.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceOutput(t, j, inputs[jobName])
		for _, mode := range []string{"", "rerun-batch"} {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"run", "--job", jobName, "--executor", "microbatch", "--sink-mode", "idempotent", "--output", out,
				"--storage", "file://" + t.TempDir(), "--trigger", "1ms", "--parallelism", "3", "--max-batch-records", "600",
				"--fail", "point=batch.mid-run,occurrence=7", "--progress", "json", "--summary", "json"}, inputs[jobName]...)
			if mode != "" {
				args = append(args, "--lost-piece-recovery", mode)
			} else {
				mode = "lineage" // the default
			}
			what := jobName + "/" + mode
			code, stdout, stderr := rewind(t, args...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", what, code, stderr)
			}
			got, _, err := sink.Resolve(out, j.Output)
			if err != nil {
				t.Fatal(err)
			}
			if d := got.Diff(want, 5); d != "" {
				t.Fatalf("%s differs from the reference:\n%s", what, d)
			}
			type src struct {
				Input, Partition string
				Start            int64 `json:"start_offset"`
				End              int64 `json:"end_offset"`
			}
			var loss struct {
				Recovery    string `json:"recovery"`
				BatchID     int64  `json:"batch_id"`
				LostWorkers []int  `json:"lost_workers"`
				PiecesLost  int    `json:"pieces_lost"`
				Rebuilt     int    `json:"pieces_rebuilt"`
				Reread      int64  `json:"records_reread"`
			}
			batches := map[int64][]src{}
			reruns, losses := 0, 0
			for _, line := range strings.Split(stderr, "\n") {
				if !strings.HasPrefix(line, "{") {
					continue
				}
				var ev struct {
					Event   string `json:"event"`
					BatchID int64  `json:"batch_id"`
					Rerun   bool   `json:"rerun"`
					Sources []src  `json:"sources"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("%s: progress line %q: %v", what, line, err)
				}
				switch ev.Event {
				case "batch":
					batches[ev.BatchID] = ev.Sources
					if ev.Rerun {
						reruns++
					}
				case "lost_pieces":
					losses++
					if err := json.Unmarshal([]byte(line), &loss); err != nil {
						t.Fatal(err)
					}
				}
			}
			if losses != 1 || loss.Recovery != mode || len(loss.LostWorkers) != 1 {
				t.Fatalf("%s: %d lost_pieces lines, last %+v", what, losses, loss)
			}
			var wantRecs int64
			wantPieces := 0
			for _, s := range batches[loss.BatchID] {
				i, err := strconv.Atoi(strings.TrimPrefix(s.Partition, "p"))
				if err != nil {
					t.Fatalf("partition %q", s.Partition)
				}
				if i%par == loss.LostWorkers[0] && s.End > s.Start {
					wantRecs += s.End - s.Start
					wantPieces++
				}
			}
			if wantPieces == 0 {
				t.Fatalf("%s: the dead worker held nothing in batch %d; the test proves nothing", what, loss.BatchID)
			}
			var s report.Summary
			if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
				t.Fatal(err)
			}
			lp := s.LostPieces
			if lp == nil || lp.Recovery != mode || lp.PiecesLost != wantPieces || lp.RecordsReread != loss.Reread || lp.RebuildMs == nil {
				t.Fatalf("%s: summary lost_pieces %+v, progress %+v, want %d pieces lost", what, lp, loss, wantPieces)
			}
			// etl emits each kept input row once: under lineage nothing is
			// re-run, so rows out must not count the dead worker's rows twice.
			if jobName == "etl" && mode == "lineage" && s.RowsOut != int64(len(want.Rows)) {
				t.Fatalf("%s: %d rows out, the reference has %d rows", what, s.RowsOut, len(want.Rows))
			}
			if mode == "lineage" {
				if loss.Reread != wantRecs || loss.Rebuilt != wantPieces || reruns != 0 || s.Checkpoints.Failed != 0 {
					t.Fatalf("%s: re-read %d records in %d pieces, %d batches re-run; the lost pieces hold %d records in %d pieces",
						what, loss.Reread, loss.Rebuilt, reruns, wantRecs, wantPieces)
				}
			} else if reruns != 1 || loss.Reread <= wantRecs {
				t.Fatalf("%s: %d batches re-run, %d records fed again (the lost pieces hold %d)", what, reruns, loss.Reread, wantRecs)
			}
			t.Logf("%s: batch %d, worker %d lost %d pieces holding %d records; %d records fed again",
				what, loss.BatchID, loss.LostWorkers[0], wantPieces, wantRecs, loss.Reread)
		}
	}
}

// TestTraceTellsTheRecovery runs trace under each executor: the timeline
// shows the executor's steps, the crash and the recovery, and the run ends
// equal to the reference.
func TestTraceTellsTheRecovery(t *testing.T) {
	for exec, want := range map[string][]string{
		"recordwise": {"checkpoint 1 COMPLETED", "marker after", "CRASH: worker 1", "RECOVERED from checkpoint"},
		// "batch 0 (RE-RUN):" when the crash lands in batch 0.
		"microbatch": {"batch 0", "offsets in/p0 [0,", "CRASH: worker 1", "RECOVERED"},
		"diskphase":  {"finite job 0 committed", "CRASH: worker 1"},
	} {
		// The trace's own input at a slower pace: under -race on a loaded
		// machine a first checkpoint has taken 220 ms, longer than the
		// default input lasts, and the crash waits for it.
		code, stdout, stderr := rewind(t, "trace", "--format", "log", "--executor", exec, "--input", "gen:records=4000,keys=8,partitions=2,rate=8000,seed=1")
		if code != 0 {
			t.Fatalf("trace --executor %s: exit %d: %s", exec, code, stderr)
		}
		for _, w := range append(want, "result: equals the reference executor's") {
			if !strings.Contains(stdout, w) {
				t.Errorf("trace --executor %s lacks %q:\n%s", exec, w, stdout)
			}
		}
	}
	if code, _, stderr := rewind(t, "trace", "--executor", "reference"); code != exitUsage || !strings.Contains(stderr, "allowed are") {
		t.Errorf("trace of the reference: exit %d, %s", code, stderr)
	}
}

// TestInterruptedRunExits130WithItsSummary: an interrupt stops the run, the
// summary of what ran is still printed with a note on how to go on, and the
// exit code (130) tells a script the run did not finish; the run can then
// be resumed.
func TestInterruptedRunExits130WithItsSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	args := []string{"run", "--executor", "microbatch", "--input", "gen:records=0,rate=5000", "--output", out,
		"--storage", "file://" + t.TempDir(), "--trigger", "20ms", "--progress", "json", "--summary", "json"}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout bytes.Buffer
	// The input is endless: only the interrupt ends this run. It comes
	// once the first batch has committed, so the run has begun.
	stderr := &cancelOn{mark: []byte(`"event":"batch"`), cancel: cancel}
	code := execute(ctx, args, &stdout, stderr)
	if code != 130 {
		t.Fatalf("exit %d, want 130; stderr %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"interrupted":true`) {
		t.Errorf("the summary does not say the run was interrupted:\n%s", stdout.String())
	}
	if !strings.Contains(stdout.String(), "interrupted: the same command with --resume") {
		t.Errorf("the summary lacks the resume note:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "rewind: interrupted before the run finished") {
		t.Errorf("stderr does not say the run was interrupted: %s", stderr.String())
	}
	rec, err := runrecord.Read(out)
	if err != nil || rec.Finished != nil {
		t.Fatalf("the run record after an interrupt: %+v, %v; want an unfinished record", rec, err)
	}
	if text, err := os.ReadFile(filepath.Join(out, outdir.IncompleteName)); err != nil || !strings.Contains(string(text), "interrupted") {
		t.Errorf("after an interrupt the marker reads %q (%v); want it to say the run was interrupted", text, err)
	}
	if !strings.Contains(stdout.String(), "the output is marked incomplete") {
		t.Errorf("the summary does not note the marker:\n%s", stdout.String())
	}
}

// cancelOn is a stderr that calls cancel once mark has been written to it.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	mark   []byte
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if bytes.Contains(c.buf.Bytes(), c.mark) {
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
