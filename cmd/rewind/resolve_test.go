package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// replayedRun runs etl on recordwise with append and a worker killed
// mid-run, so the output holds rows published twice (etl keeps no state:
// a replayed record gives the same row again), and returns the output
// directory and the run's JSON summary.
func replayedRun(t *testing.T) (string, map[string]any) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := rewind(t, "run", "--executor", "recordwise", "--job", "etl", "--checkpoint-interval", "5ms", "--sink-mode", "append",
		"--input", "gen:records=60000,keys=700,partitions=2", "--output", out, "--storage", t.TempDir(),
		"--fail", "worker=1,after-records=30000", "--progress", "none", "--summary", "json")
	if code != 0 {
		t.Fatalf("run exited %d: %s", code, stderr)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
		t.Fatalf("summary: %v", err)
	}
	if s["sink_duplicate_rows"].(float64) == 0 {
		t.Fatalf("the run's output has no duplicates to resolve: %s", lastLine(stdout))
	}
	return out, s
}

// TestResolveCommandMatchesTheRun: rewind resolve, spilling under a tiny
// --max-memory, reports the run summary's counts and writes, in Parquet and
// CSV, the table sink.Resolve reads, read back here with readers of its own.
func TestResolveCommandMatchesTheRun(t *testing.T) {
	out, run := replayedRun(t)
	j, err := job.Build("etl", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"resolved.parquet", "resolved.csv"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), name)
			code, stdout, stderr := rewind(t, "resolve", out, "--out", file, "--max-memory", "4KiB", "--summary", "json")
			if code != 0 {
				t.Fatalf("resolve exited %d: %s", code, stderr)
			}
			var s map[string]any
			if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
				t.Fatalf("resolve summary: %v", err)
			}
			for got, field := range map[string]string{"visible_rows": "visible_rows", "resolved_rows": "resolved_rows",
				"duplicate_rows": "sink_duplicate_rows", "conflicting_rows": "sink_conflicting_rows"} {
				if s[got] != run[field] {
					t.Errorf("resolve %s = %v, the run's %s = %v", got, s[got], field, run[field])
				}
			}
			if s["spilled_runs"].(float64) < 2 {
				t.Errorf("a 4 KiB budget spilled %v runs, want several", s["spilled_runs"])
			}
			got := readTableFile(t, file, sink.ColumnNames(j.Output.Schema))
			if d := got.Diff(want, 10); d != "" {
				t.Fatalf("--out %s differs from the resolved output: %s", name, d)
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("--out file mode %v (%v), want 0644", fi.Mode(), err)
			}
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".*"))
			if len(left) != 0 {
				t.Errorf("temporary files left beside --out: %v", left)
			}
		})
	}
	code, stdout, stderr := rewind(t, "resolve", out)
	if code != 0 || !strings.Contains(stdout, "after resolving") || strings.Contains(stdout, "wrote") {
		t.Fatalf("resolve without --out: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// readTableFile reads a table file with arrow-go (Parquet) or encoding/csv,
// not the sink's reader.
func readTableFile(t *testing.T, path string, cols []string) *sink.Table {
	t.Helper()
	tb := &sink.Table{Columns: cols}
	if strings.HasSuffix(path, ".csv") {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(recs[0], ",") != strings.Join(cols, ",") {
			t.Fatalf("%s header %v, want %v", path, recs[0], cols)
		}
		for _, rec := range recs[1:] {
			row := make([]int64, len(rec))
			for i, s := range rec {
				if row[i], err = strconv.ParseInt(s, 10, 64); err != nil {
					t.Fatal(err)
				}
			}
			tb.Rows = append(tb.Rows, row)
		}
		return tb
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	table, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer table.Release()
	tr := array.NewTableReader(table, 1<<20)
	defer tr.Release()
	for tr.Next() {
		rows, err := sink.RowsOf(tr.RecordBatch(), cols, nil)
		if err != nil {
			t.Fatal(err)
		}
		tb.Rows = append(tb.Rows, rows...)
	}
	return tb
}

// TestResolveCommandRefusesBadInput: each bad input exits with its code and
// one line naming what is wrong.
func TestResolveCommandRefusesBadInput(t *testing.T) {
	out, _ := replayedRun(t)
	tmp := t.TempDir()
	plain := filepath.Join(tmp, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	norecord := filepath.Join(tmp, "norecord")
	if err := os.MkdirAll(norecord, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(norecord, "a.csv"), []byte("key,count,sum,_version\n1,1,5,1\n1,1,5,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(tmp, "damaged")
	if err := os.CopyFS(damaged, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(damaged, "part-torn.parquet"), []byte("PAR1 torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		exit int
		want []string // in the one error line
	}{
		{[]string{"resolve"}, exitUsage, []string{"accepts 1 arg"}},
		{[]string{"resolve", out, "--max-memory", "lots"}, exitUsage, []string{"--max-memory", "lots"}},
		{[]string{"resolve", out, "--max-memory", "0"}, exitUsage, []string{"--max-memory"}},
		{[]string{"resolve", out, "--out", filepath.Join(tmp, "t.json")}, exitUsage, []string{"--out", "t.json", "extension"}},
		{[]string{"resolve", out, "--out", filepath.Join(tmp, "t.csv"), "--format", "json"}, exitUsage, []string{"--format", "json"}},
		{[]string{"resolve", out, "--format", "csv"}, exitUsage, []string{"--format", "--out"}},
		{[]string{"resolve", out, "--out", filepath.Join(out, "t.csv")}, exitUsage, []string{"--out", "inside the output directory"}},
		{[]string{"resolve", out, "--job", "sort"}, exitUsage, []string{"--job", "sort"}},
		{[]string{"resolve", out, "--summary", "yaml"}, exitUsage, []string{"--summary", "yaml"}},
		{[]string{"resolve", filepath.Join(tmp, "missing")}, exitFailure, []string{"missing", "no such file"}},
		{[]string{"resolve", plain}, exitFailure, []string{plain, "not a directory"}},
		{[]string{"resolve", norecord}, exitFailure, []string{norecord, "not a rewind output directory", "--job"}},
		{[]string{"resolve", damaged}, exitFailure, []string{"part-torn.parquet"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[1:], " "), func(t *testing.T) {
			code, stdout, stderr := rewind(t, c.args...)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != c.exit || len(lines) != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and one line", code, stdout, stderr, c.exit)
			}
			for _, w := range c.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("error %q does not mention %q", lines[0], w)
				}
			}
		})
	}
	// --job reads an output without a run record.
	code, stdout, stderr := rewind(t, "resolve", norecord, "--job", "keyed-count")
	if code != 0 || !strings.Contains(stdout, "2 visible rows, 1 after resolving (1 duplicate, 0 conflicting)") {
		t.Fatalf("resolve --job: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestResolveCommandWaitsForNoRun: an output directory a process holds
// the lock of is refused; one marked incomplete is resolved with a note.
func TestResolveCommandWaitsForNoRun(t *testing.T) {
	out, _ := replayedRun(t)
	unlock, err := outdir.Lock(out)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := rewind(t, "resolve", out)
	unlock()
	if code != exitFailure || !strings.Contains(stderr, "in use by a running rewind process") {
		t.Fatalf("locked output: exit %d, stderr %q", code, stderr)
	}
	if err := outdir.MarkIncomplete(out, outdir.Incomplete{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := rewind(t, "resolve", out)
	if code != 0 || !strings.Contains(stderr, "marked incomplete") || !strings.Contains(stdout, "after resolving") {
		t.Fatalf("incomplete output: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
