package soak

import (
	"reflect"
	"strings"
	"testing"
)

func TestDrawIsAPureFunctionOfSeedAndIndex(t *testing.T) {
	points := Points{"microbatch": {"batch.a", "run.before-finish"}, "diskphase": {"unit.a"}, "recordwise": {"checkpoint.a", "recovery.mid-restore"}}
	differ := 0
	for i := range 40 {
		a, b := Draw(7, i, points, true), Draw(7, i, points, true)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("schedule %d of seed 7 drawn twice differs:\n%s\n%s", i, a.Describe(), b.Describe())
		}
		if a.Mode.Name != Modes[i%len(Modes)].Name {
			t.Fatalf("schedule %d runs in %s, want %s", i, a.Mode.Name, Modes[i%len(Modes)].Name)
		}
		if !reflect.DeepEqual(a, Draw(8, i, points, true)) {
			differ++
		}
	}
	if differ < 30 {
		t.Fatalf("only %d of 40 schedules differ between seeds 7 and 8", differ)
	}
}

func TestClassify(t *testing.T) {
	damaged := []Damaged{{File: DurableFile{Path: "/x/out/_idempotent.db", Kind: "output _idempotent.db",
		Names: []string{"/x/out/_idempotent.db", "_idempotent.db", "_idempotent.db"}}, Action: "truncate-0"}}
	stderr := func(lines ...string) string {
		return "rewind: run r1 (if this process dies, resume with --resume r1)\n{\"event\":\"crash\"}\n" + strings.Join(lines, "\n") + "\n"
	}
	cases := []struct {
		name string
		o    Outcome
		want Verdict
	}{
		{"equal", Outcome{Proc: ProcResult{Exit: 0}}, OK},
		{"recovered from damage", Outcome{Proc: ProcResult{Exit: 0}, Damaged: damaged}, OK},
		{"silent: exit 0, wrong, after damage", Outcome{Proc: ProcResult{Exit: 0}, Damaged: damaged, Wrong: "3 rows missing"}, Silent},
		{"wrong without damage", Outcome{Proc: ProcResult{Exit: 0}, Wrong: "3 rows missing"}, Failure},
		{"detected", Outcome{Proc: ProcResult{Exit: 1, Stderr: stderr("rewind: warning: x", "rewind: damaged store /x/out/_idempotent.db: bad page")}, Damaged: damaged}, Detected},
		{"exit 1 not naming the file", Outcome{Proc: ProcResult{Exit: 1, Stderr: stderr("rewind: internal error")}, Damaged: damaged}, Failure},
		{"exit 1 with nothing damaged", Outcome{Proc: ProcResult{Exit: 1, Stderr: stderr("rewind: failed")}}, Failure},
		{"exit 2 on damage", Outcome{Proc: ProcResult{Exit: 2, Stderr: stderr("rewind: _idempotent.db is bad")}, Damaged: damaged}, Failure},
		{"panic", Outcome{Proc: ProcResult{Exit: 2, Stderr: stderr("panic: assertion failed", "", "goroutine 1 [running]:")}, Damaged: damaged}, Failure},
		{"panic naming the file", Outcome{Proc: ProcResult{Exit: 1, Stderr: stderr("panic: _idempotent.db", "goroutine 1 [running]:")}, Damaged: damaged}, Failure},
		{"fatal runtime error", Outcome{Proc: ProcResult{Exit: 2, Stderr: stderr("unexpected fault address 0x7f88ddbb3008", "fatal error: fault", "[signal SIGBUS: bus error code=0x2]", "goroutine 1 gp=0x14 m=0 [running]:")}, Damaged: damaged}, Failure},
		{"hang", Outcome{Proc: ProcResult{Exit: -1, TimedOut: true, SIGKILL: true}}, Failure},
		{"killed unasked", Outcome{Proc: ProcResult{Exit: -1, Signal: "segmentation fault"}}, Failure},
	}
	for _, c := range cases {
		got, reason := Classify(c.o)
		if got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, reason, c.want)
		}
		if strings.Contains(c.o.Proc.Stderr, "goroutine 1") && !strings.Contains(reason, "Go trace") {
			t.Errorf("%s: reason %q does not say the process crashed with a Go trace", c.name, reason)
		}
	}
}

func TestASilentResultFailsTheCampaign(t *testing.T) {
	r := &Report{ByMode: map[string]*Totals{}, ByKind: map[string]*KindTotals{}}
	for _, m := range Modes {
		r.ByMode[m.Name] = &Totals{}
	}
	s := &Schedule{Mode: Modes[0]}
	r.add(&Result{Sched: s, Verdict: OK})
	r.add(&Result{Sched: s, Verdict: Detected, Damaged: []Damaged{{File: DurableFile{Kind: "storage x"}}}})
	if r.ExitCode() != 0 {
		t.Fatalf("ok and detected schedules: exit %d, want 0", r.ExitCode())
	}
	r.add(&Result{Sched: s, Verdict: Silent, Damaged: []Damaged{{File: DurableFile{Kind: "output y"}}}})
	if r.ExitCode() != 1 || r.All.Silent != 1 || r.All.Failures != 1 || len(r.Failed) != 1 || r.ByKind["output y"].Silent != 1 {
		t.Fatalf("after a silent schedule: exit %d, totals %+v, failed %d, kind %+v; want exit 1, one silent failure", r.ExitCode(), r.All, len(r.Failed), r.ByKind["output y"])
	}
	if md := Markdown(r, nil, Env{}); !strings.Contains(md, "**SILENT**") {
		t.Fatalf("the report does not list the silent schedule:\n%s", md)
	}
}

func TestKindsFoldNumbersAndHashes(t *testing.T) {
	for path, want := range map[string]string{
		"destination/append/00000000000000000005-4b89e3f7b4725d6b.json": "destination/append/N-H.json",
		"destination/append/00000000000000000001-edde3e8f3d1971b7.json": "destination/append/N-H.json",
		"chk-12/count-3/op-count":      "chk-N/count-N/op-count",
		"part-idempotent.parquet":      "part-idempotent.parquet",
		"_staging/e9-s1-a0-p0.csv":     "_staging/eN-sN-aN-pN.csv",
		"commits/00000000000000000042": "commits/N",
		// diskphase's map chunks: the first and the others are one kind.
		"j000000/map/s00001/a3/p00001.c00000.parquet": "jN/map/sN/aN/pN.cN.parquet",
		"j000000/map/s00001/a3/p00001.c00012.parquet": "jN/map/sN/aN/pN.cN.parquet",
	} {
		if got := kindOf(path); got != want {
			t.Errorf("kindOf(%s) = %s, want %s", path, got, want)
		}
	}
}
