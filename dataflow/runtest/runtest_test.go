package runtest_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func TestMain(m *testing.M) { runtest.Main(m) }

var layout = sink.Layout{
	Schema: arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.PrimitiveTypes.Int64},
		{Name: sink.VersionColumn, Type: arrow.PrimitiveTypes.Int64},
	}, nil),
	WriteKey: []string{"key"},
}

// fatalTB records the first fatal failure of a helper and stops the
// goroutine that called it, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatal(args ...any) { f.Fatalf("%v", args...) }

// fails runs fn with a fatalTB and returns what it failed with ("" if it
// did not fail).
func fails(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.msg
}

// writeAppend writes each group of rows as one flushed epoch of an append
// sink, in the given format: the files an executor's sink leaves.
func writeAppend(t *testing.T, dir string, format sink.Format, groups ...[][]int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := sink.Open(dir, sink.Append, format, layout, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, rows := range groups {
		w, err := s.Writer(0, i) // a new attempt per group, as after crashes
		if err != nil {
			t.Fatal(err)
		}
		b := optest.Batch(mem, layout.Schema, rows)
		err = w.Write(int64(i), b)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(int64(i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// replayed is an output after two replays: {1,10,1} is delivered three
// times (2 duplicates), {2,20,1} once more with another value at the same
// version (1 conflict), {2,21,2} and {3,30,1} once.
var replayed = [][][]int64{
	{{1, 10, 1}, {2, 20, 1}},
	{{1, 10, 1}, {2, 25, 1}, {2, 21, 2}},
	{{1, 10, 1}, {3, 30, 1}},
}

func TestIndependentDuplicates(t *testing.T) {
	for _, format := range []sink.Format{sink.CSV, sink.Parquet} {
		t.Run(string(format), func(t *testing.T) {
			dir := t.TempDir()
			writeAppend(t, dir, format, replayed...)
			// Hidden entries are not output.
			if err := os.WriteFile(filepath.Join(dir, "_staged.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			dups, conflicts := runtest.IndependentDuplicates(t, dir, format, layout)
			if dups != 2 || conflicts != 1 {
				t.Fatalf("%d duplicates and %d conflicts, want 2 and 1", dups, conflicts)
			}
			_, st, err := sink.Resolve(dir, layout)
			if err != nil {
				t.Fatal(err)
			}
			if st.DuplicateRows != dups || st.ConflictingRows != conflicts {
				t.Fatalf("sink.Resolve counts %d and %d, the independent counter %d and %d", st.DuplicateRows, st.ConflictingRows, dups, conflicts)
			}
		})
	}
}

func TestIndependentDuplicatesCSVColumnOrder(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.csv": "key,value,_version\n1,10,1\n2,20,1\n",
		"b.csv": "_version,key,value\n1,1,10\n1,2,21\n", // 1 duplicate, 1 conflict
	}
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if dups, conflicts := runtest.IndependentDuplicates(t, dir, sink.CSV, layout); dups != 1 || conflicts != 1 {
		t.Fatalf("%d duplicates and %d conflicts, want 1 and 1", dups, conflicts)
	}
}

func TestIndependentDuplicatesRejects(t *testing.T) {
	for name, c := range map[string]struct {
		file, body, want string
	}{
		"other format":   {"a.parquet", "", "is not csv"},
		"missing column": {"a.csv", "key,_version\n1,1\n", "has no column value"},
		"short row":      {"a.csv", "key,value,_version\n1,1\n", "has 2 fields, the header 3"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			msg := fails(t, func(tb testing.TB) { runtest.IndependentDuplicates(tb, dir, sink.CSV, layout) })
			if !strings.Contains(msg, c.want) {
				t.Fatalf("failed with %q, want it to say %q", msg, c.want)
			}
		})
	}
}

// finished is the outcome of a run that wrote replayed with an append sink,
// and what CheckOutput needs to accept it.
func finished(t *testing.T, format sink.Format) runtest.Outcome {
	t.Helper()
	dir := t.TempDir()
	writeAppend(t, dir, format, replayed...)
	table, st, err := sink.Resolve(dir, layout)
	if err != nil {
		t.Fatal(err)
	}
	want := &sink.Table{Columns: table.Columns, Rows: [][]int64{{1, 10, 1}, {2, 21, 2}, {3, 30, 1}}}
	return runtest.Outcome{
		Env:     &run.Env{Config: run.Config{Output: dir, OutputFormat: format, SinkMode: sink.Append}, Job: &job.Job{Output: layout}},
		Summary: &report.Summary{SinkDuplicateRows: st.DuplicateRows, SinkConflictingRows: st.ConflictingRows, LateRows: 3},
		Table:   table, Stats: st,
		Want: &runtest.Want{Table: want, LateRows: 3},
	}
}

func TestCheckOutput(t *testing.T) {
	for _, format := range []sink.Format{sink.CSV, sink.Parquet} {
		t.Run(string(format), func(t *testing.T) {
			if msg := fails(t, func(tb testing.TB) { runtest.CheckOutput(tb, "ok", finished(t, format)) }); msg != "" {
				t.Fatalf("a correct outcome fails: %s", msg)
			}
		})
	}
	for name, c := range map[string]struct {
		spoil func(o *runtest.Outcome)
		want  string
	}{
		"run error":         {func(o *runtest.Outcome) { o.Err = errors.New("boom") }, "run failed: boom"},
		"other rows":        {func(o *runtest.Outcome) { o.Want.Table.Rows[1][1] = 22 }, "differs from the oracle"},
		"idempotent dups":   {func(o *runtest.Outcome) { o.Env.Config.SinkMode = sink.Idempotent }, "idempotent sink shows 2 duplicate rows"},
		"summary dups":      {func(o *runtest.Outcome) { o.Summary.SinkDuplicateRows = 1 }, "summary reports 1 duplicates"},
		"summary conflicts": {func(o *runtest.Outcome) { o.Summary.SinkConflictingRows = 0 }, "summary reports 0 conflicting rows"},
		"txn conflicts": {func(o *runtest.Outcome) {
			o.Env.Config.SinkMode = sink.Transactional
			o.Stats.DuplicateRows = 0
			o.Summary.SinkDuplicateRows = 0
		}, "transactional sink shows 1 conflicting rows"},
		"resolve miscounts": {func(o *runtest.Outcome) { o.Stats.DuplicateRows, o.Summary.SinkDuplicateRows = 1, 1 }, "counting visible files one by one finds 2 and 1"},
		"resolve conflicts": {func(o *runtest.Outcome) { o.Stats.ConflictingRows, o.Summary.SinkConflictingRows = 0, 0 }, "counting visible files one by one finds 2 and 1"},
		"spilled disagrees": {func(o *runtest.Outcome) { o.Stats.ResolvedRows = 2 }, "resolving under a 64 KiB budget"},
		"lost records":      {func(o *runtest.Outcome) { o.Summary.LostRecords = 4 }, "4 records lost"},
		"late rows":         {func(o *runtest.Outcome) { o.Summary.LateRows = 2 }, "2 late rows, the oracle has 3"},
	} {
		t.Run(name, func(t *testing.T) {
			o := finished(t, sink.CSV)
			c.spoil(&o)
			if msg := fails(t, func(tb testing.TB) { runtest.CheckOutput(tb, name, o) }); !strings.Contains(msg, c.want) {
				t.Fatalf("failed with %q, want it to say %q", msg, c.want)
			}
		})
	}
}

func TestFastDir(t *testing.T) {
	for _, disk := range []bool{false, true} {
		var dir string
		t.Run("", func(t *testing.T) {
			dir = runtest.FastDir(t, "rewind-runtest-", disk)
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 0 {
				t.Fatalf("FastDir %s: %d entries, %v; want a fresh empty directory", dir, len(entries), err)
			}
			if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && !disk &&
				!strings.HasPrefix(dir, "/dev/shm/rewind-runtest-") {
				t.Fatalf("FastDir %s is not on the RAM disk", dir)
			}
			if disk && strings.HasPrefix(dir, "/dev/shm/") {
				t.Fatalf("FastDir with disk set is %s, on the RAM disk", dir)
			}
		})
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("FastDir %s is still there after its test: %v", dir, err)
		}
	}
}

func TestOracle(t *testing.T) {
	cfg := run.Config{Job: "keyed-count", Params: job.DefaultParams, Seed: 1,
		Inputs: map[string]string{job.DefaultInput: "gen:records=300,keys=20,seed=3"}}
	a := runtest.Oracle(t, cfg)
	if len(a.Table.Rows) == 0 || a.RecordsIn != 300 {
		t.Fatalf("oracle read %d records and resolved %d rows; want 300 records and some rows", a.RecordsIn, len(a.Table.Rows))
	}
	if b := runtest.Oracle(t, cfg); b != a {
		t.Fatal("the same configuration is evaluated again, not cached")
	}
	// A paced input holds the same records: the oracle reads them unpaced
	// (at 1 record/s this test would otherwise take minutes).
	for _, spec := range []string{"gen:records=300,keys=20,rate=1,seed=3", "gen:records=300,keys=20,seed=3,rate=1"} {
		paced := cfg
		paced.Inputs = map[string]string{job.DefaultInput: spec}
		if d := runtest.Oracle(t, paced).Table.Diff(a.Table, 5); d != "" {
			t.Fatalf("%s gives another answer: %s", spec, d)
		}
	}
	other := cfg
	other.Inputs = map[string]string{job.DefaultInput: "gen:records=300,keys=20,seed=4"}
	if runtest.Oracle(t, other).Table.Diff(a.Table, 1) == "" {
		t.Fatal("another input seed gives the same answer: the cache key misses the inputs")
	}
}

func TestGenInputs(t *testing.T) {
	for _, c := range []struct {
		job  string
		gen  runtest.Gen
		want map[string]string
	}{
		{"keyed-count", runtest.Gen{Records: 4000, Keys: 200, JoinKeys: 1000, Seed: 3},
			map[string]string{job.DefaultInput: "gen:records=4000,keys=200,seed=3"}},
		{"join", runtest.Gen{Records: 4000, Keys: 200, JoinKeys: 1000, Seed: 3},
			map[string]string{job.InputOrders: "gen:records=2000,keys=1000,seed=3", job.InputPayments: "gen:records=2000,keys=1000,seed=4"}},
		{"join", runtest.Gen{Records: 600, JoinKeys: 150, Seed: 1, Rate: 100000},
			map[string]string{job.InputOrders: "gen:records=300,keys=150,seed=1,rate=100000", job.InputPayments: "gen:records=300,keys=150,seed=2,rate=100000"}},
	} {
		if got := c.gen.Inputs(c.job); !maps.Equal(got, c.want) {
			t.Errorf("%+v.Inputs(%s) = %v, want %v", c.gen, c.job, got, c.want)
		}
	}
}

func TestCheckRecoveryPoints(t *testing.T) {
	got := []inspect.RecoveryPoint{
		{Executor: "x", Run: "j/r", Kind: "batch", ID: 0, Complete: true, Status: "committed", Objects: 2, Bytes: 30},
		{Executor: "x", Run: "j/r", Kind: "batch", ID: 1, Status: "no commit entry", Objects: 1, Bytes: 20},
	}
	want := []runtest.WantPoint{
		{Run: "j/r", ID: 0, Complete: true, Objects: 2, Bytes: 30, Status: "commit"},
		{Run: "j/r", ID: 1, Objects: 1, Bytes: 20, Status: "no commit"},
	}
	if msg := fails(t, func(tb testing.TB) { runtest.CheckRecoveryPoints(tb, "x", "batch", got, want) }); msg != "" {
		t.Fatalf("the wanted points fail: %s", msg)
	}
	if msg := fails(t, func(tb testing.TB) { runtest.CheckRecoveryPoints(tb, "x", "batch", got[:1], want) }); !strings.Contains(msg, "1 recovery points, want 2") {
		t.Fatalf("a missing point: failed with %q", msg)
	}
	for name, spoil := range map[string]func(w *runtest.WantPoint){
		"id": func(w *runtest.WantPoint) { w.ID = 5 }, "complete": func(w *runtest.WantPoint) { w.Complete = true },
		"objects": func(w *runtest.WantPoint) { w.Objects = 3 }, "bytes": func(w *runtest.WantPoint) { w.Bytes = 21 },
		"status": func(w *runtest.WantPoint) { w.Status = "committed" }, "run": func(w *runtest.WantPoint) { w.Run = "j/other" },
	} {
		w := slices.Clone(want)
		spoil(&w[1])
		// CheckRecoveryPoints reports every wrong point with Errorf.
		rec := &errorTB{TB: t}
		runtest.CheckRecoveryPoints(rec, "x", "batch", got, w)
		if !strings.Contains(rec.msg, "recovery point 1 is") {
			t.Errorf("%s: a wrong point passes (%q)", name, rec.msg)
		}
	}
	rec := &errorTB{TB: t}
	runtest.CheckRecoveryPoints(rec, "x", "checkpoint", got, want)
	if !strings.Contains(rec.msg, "recovery point 0 is") {
		t.Errorf("a point of another kind passes (%q)", rec.msg)
	}
}

// errorTB records what a helper reports with Errorf instead of failing.
type errorTB struct {
	testing.TB
	msg string
}

func (e *errorTB) Errorf(format string, args ...any) { e.msg += fmt.Sprintf(format, args...) + "\n" }

func TestCheckCrashes(t *testing.T) {
	outcome := func(fired, crashes, recoveries int) runtest.Outcome {
		inj := fault.NewInjector(nil)
		inj.Fired = make([]fault.Spec, fired)
		return runtest.Outcome{Env: &run.Env{Faults: inj}, Summary: &report.Summary{Crashes: crashes, Recoveries: make([]report.Recovery, recoveries)}}
	}
	for _, c := range []struct {
		fired, crashes, recoveries int
		exact, coalesced           bool // whether each check accepts it
	}{
		{0, 0, 0, true, true},
		{2, 2, 2, true, true},
		{2, 1, 1, false, true},
		{2, 2, 1, false, false},
		{2, 0, 0, false, false},
		{1, 2, 2, false, false},
	} {
		o := outcome(c.fired, c.crashes, c.recoveries)
		what := fmt.Sprintf("%d fired, %d crashes, %d recoveries", c.fired, c.crashes, c.recoveries)
		if msg := fails(t, func(tb testing.TB) { runtest.CheckCrashes(tb, what, o) }); (msg == "") != c.exact {
			t.Errorf("CheckCrashes on %s: failed with %q", what, msg)
		}
		if msg := fails(t, func(tb testing.TB) { runtest.CheckCoalescedCrashes(tb, what, o) }); (msg == "") != c.coalesced {
			t.Errorf("CheckCoalescedCrashes on %s: failed with %q", what, msg)
		}
	}
}
