package fault

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	good := map[string]Spec{
		"worker=1,after-records=500":                                     {Worker: 1, AfterRecords: 500},
		"point=batch.mid-run":                                            {Worker: -1, Point: "batch.mid-run", Occurrence: 1},
		"point=batch.mid-run,occurrence=3":                               {Worker: -1, Point: "batch.mid-run", Occurrence: 3},
		"worker=0,after-records=9,after-point=checkpoint.after-metadata": {Worker: 0, AfterRecords: 9, AfterPoint: "checkpoint.after-metadata"},
		"worker=0,at=4.5s":                                               {Worker: 0, At: 4500 * time.Millisecond},
		"worker=2,at=300ms,after-point=p":                                {Worker: 2, At: 300 * time.Millisecond, AfterPoint: "p"},
		"point=batch.mid-run,worker=1,occurrence=2":                      {Worker: 1, Point: "batch.mid-run", Occurrence: 2, OnlyWorker: true},
		"worker=1,at-point=cp.ack":                                       {Worker: 1, AtPoint: "cp.ack", Occurrence: 1},
		"worker=0,at-point=cp.ack,occurrence=2,after-point=cp.done":      {Worker: 0, AtPoint: "cp.ack", Occurrence: 2, AfterPoint: "cp.done"},
	}
	for in, want := range good {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"worker=1":                              "needs both",
		"after-records=5":                       "needs both",
		"worker=x,after-records=5":              "whole number",
		"worker=1,after-records=0":              "whole number",
		"point=a,worker=1,after-records=3":      "cannot be combined",
		"point=a,worker=1,kill=process":         "drop worker=",
		"point=a,after-point=b":                 "cannot be combined",
		"worker=1,after-point=b":                "needs both",
		"occurrence=2,worker=1,after-records=3": "goes with point",
		"colour=red":                            "unknown key",
		"point":                                 "not key=value",
		"point=a,point=b":                       "twice",
		"point=":                                "point= has no value",
		"worker=1,after-records=":               "after-records= has no value",
		"worker=1,at=0s":                        "at must be a duration > 0",
		"worker=1,at=-2s":                       "at must be a duration > 0",
		"worker=1,at=soon":                      "at must be a duration > 0",
		"worker=1,at=1s,after-records=5":        "two triggers",
		"point=a,at=1s":                         "cannot be combined",
		"point=a,at-point=b":                    "cannot be combined",
		"worker=1,at-point=a,after-records=3":   "after-records= and at-point= are two triggers",
		"worker=1,at-point=a,at=1s":             "at= and at-point= are two triggers",
		"at-point=a":                            "needs both",
		"worker=1,at-point=a,after-point=a":     "name the same point",
		"worker=1,at-point=a,kill=process":      "goes with point=",
		"worker=1,at-point=a,occurrence=0":      "whole number",
		"worker=1,at-point=":                    "at-point= has no value",
	}
	for in, phrase := range bad {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), phrase) {
			t.Errorf("Parse(%q) error %v, want one containing %q", in, err, phrase)
		}
	}
}

func TestInjectorFiresOnceAtTheRightOccurrence(t *testing.T) {
	in := NewInjector([]Spec{
		{Worker: -1, Point: "p", Occurrence: 2},
		{Worker: 1, AfterRecords: 10},
	})
	if err := in.Point("p", 0); err != nil {
		t.Fatalf("first occurrence fired: %v", err)
	}
	c, ok := AsCrash(in.Point("p", 3))
	if !ok || c.Worker != 3 {
		t.Fatalf("second occurrence: got %v, want a crash of worker 3", c)
	}
	if err := in.Point("p", 0); err != nil {
		t.Fatalf("fault fired twice: %v", err)
	}
	if err := in.Read(9); err != nil {
		t.Fatalf("fired before threshold: %v", err)
	}
	if c, ok := AsCrash(in.Read(1)); !ok || c.Worker != 1 {
		t.Fatalf("worker kill at 10 records: got %v", c)
	}
	if err := in.Read(100); err != nil || len(in.Pending()) != 0 || len(in.Fired) != 2 {
		t.Fatalf("after all fired: err %v pending %v fired %v", err, in.Pending(), in.Fired)
	}
}

// TestAfterPointHoldsTheKillBack: a worker kill with after-point fires
// once both its record threshold and its point are reached, whichever
// comes last: at the point itself when the records were read first (there
// may be no read after it), at the threshold's read otherwise; and the
// spec prints as it was written.
func TestAfterPointHoldsTheKillBack(t *testing.T) {
	text := "worker=1,after-records=10,after-point=cp.done"
	s, err := Parse(text)
	if err != nil || s.String() != text {
		t.Fatalf("Parse(%q) = %v, %v; String %q", text, s, err, s.String())
	}
	in := NewInjector([]Spec{s})
	if err := in.Read(50); err != nil {
		t.Fatalf("fired before the point was reached: %v", err)
	}
	if err := in.Point("other", 1); err != nil {
		t.Fatalf("fired at another point: %v", err)
	}
	// The coordinator reaches the point: the kill is worker 1's.
	if c, ok := AsCrash(in.Point("cp.done", Coordinator)); !ok || c.Worker != 1 || c.Spec != s {
		t.Fatalf("the point, records read already: got %v, want a crash of worker 1", c)
	}
	if err := in.Read(1); err != nil || len(in.Fired) != 1 {
		t.Fatalf("fired again at a read: %v (fired %v)", err, in.Fired)
	}

	// Point first, records after.
	in = NewInjector([]Spec{s})
	_ = in.Point("cp.done", -1)
	if err := in.Read(9); err != nil {
		t.Fatalf("fired before the threshold: %v", err)
	}
	if _, ok := AsCrash(in.Read(1)); !ok {
		t.Fatal("did not fire at the threshold once the point was reached")
	}
}

func TestValidate(t *testing.T) {
	specs := []Spec{{Worker: -1, Point: "x", Occurrence: 1}}
	if err := Validate(specs, []string{"y"}, 2); err == nil || !strings.Contains(err.Error(), "--list-fail-points") {
		t.Fatalf("unknown point: %v", err)
	}
	if err := Validate([]Spec{{Worker: 2, AfterRecords: 1}}, nil, 2); err == nil {
		t.Fatal("worker 2 of 2 accepted")
	}
	if err := Validate([]Spec{{Worker: 1, AfterRecords: 1, AfterPoint: "x"}}, []string{"y"}, 2); err == nil || !strings.Contains(err.Error(), `unknown point "x"`) {
		t.Fatalf("unknown after-point: %v", err)
	}
	if err := Validate([]Spec{{Worker: 1, AfterRecords: 1, AfterPoint: "y"}}, []string{"y"}, 2); err != nil {
		t.Fatalf("known after-point: %v", err)
	}
	if err := Validate([]Spec{{Worker: 0, At: time.Second}}, nil, 1); err != nil {
		t.Fatalf("timed kill: %v", err)
	}
	for _, s := range []Spec{{Worker: 0, At: -time.Second}, {Worker: 0, At: time.Second, AfterRecords: 3}, {Worker: 0}} {
		if err := Validate([]Spec{s}, nil, 1); err == nil || !strings.Contains(err.Error(), "exactly one of") {
			t.Errorf("Validate(%+v) = %v, want a trigger error", s, err)
		}
	}
}

// TestKillProcess: kill=process parses and prints back, goes with named
// points only, and fires through the hook (or fails the run without one);
// the run driver's points take nothing else.
func TestKillProcess(t *testing.T) {
	text := "point=sink.after-commit,occurrence=2,kill=process"
	s, err := Parse(text)
	if err != nil || s.String() != text || !s.KillProcess || s.IsWorkerKill() {
		t.Fatalf("Parse(%q) = %+v, %v; String %q", text, s, err, s.String())
	}
	for in, phrase := range map[string]string{
		"worker=1,after-records=5,kill=process": "goes with point=",
		"point=a,kill=worker":                   "kill must be process",
		"point=a,kill=process,kill=process":     "twice",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), phrase) {
			t.Errorf("Parse(%q) error %v, want one containing %q", in, err, phrase)
		}
	}

	for _, c := range []struct {
		spec   Spec
		phrase string // "" = valid
	}{
		{Spec{Worker: -1, Point: PointBeforeFinish, Occurrence: 1, KillProcess: true}, ""},
		{Spec{Worker: -1, Point: PointAfterFinish, Occurrence: 1, KillProcess: true}, ""},
		{Spec{Worker: -1, Point: PointMidFinish, Occurrence: 1, KillProcess: true}, ""},
		{Spec{Worker: -1, Point: "y", Occurrence: 3, KillProcess: true}, ""},
		{Spec{Worker: -1, Point: PointBeforeFinish, Occurrence: 1}, "kill=process only"},
		{Spec{Worker: -1, Point: PointAfterFinish, Occurrence: 2, KillProcess: true}, "occurrence must be 1"},
		{Spec{Worker: 0, AfterRecords: 1, AfterPoint: PointBeforeFinish}, "no worker is left"},
		{Spec{Worker: -1, Point: "x", Occurrence: 1, KillProcess: true}, "unknown point"},
	} {
		err := Validate([]Spec{c.spec}, []string{"y"}, 2)
		if (c.phrase == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("Validate(%s) = %v, want %q", c.spec, err, c.phrase)
		}
	}

	spec := Spec{Worker: -1, Point: "p", Occurrence: 2, KillProcess: true}
	in := NewInjector([]Spec{spec})
	var killed []Spec
	in.KillProcess = func(s Spec) { killed = append(killed, s) }
	if err := in.Point("p", 0); err != nil || len(killed) != 0 {
		t.Fatalf("first occurrence: err %v, killed %v", err, killed)
	}
	err = in.Point("p", 0)
	if _, crash := AsCrash(err); crash || err == nil || len(killed) != 1 || killed[0] != spec {
		t.Fatalf("second occurrence: err %v (a role crash: %v), killed %v; want the hook called once and an error", err, crash, killed)
	}
	if len(in.Fired) != 1 || len(in.Pending()) != 0 {
		t.Fatalf("fired %v pending %v", in.Fired, in.Pending())
	}
	in = NewInjector([]Spec{spec})
	_ = in.Point("p", 0)
	err = in.Point("p", 0)
	if _, crash := AsCrash(err); crash || err == nil || !strings.Contains(err.Error(), "cannot kill its own process") {
		t.Fatalf("without a hook: %v; want an error that is no role crash", err)
	}
}

// A timed kill fires at the first read once At has passed since the start
// the Injector was given, on its clock, and only once.
func TestTimedKillFiresAtTheFirstReadAfterAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	in := NewInjector([]Spec{{Worker: 1, At: 4500 * time.Millisecond}})
	in.Start(start, func() time.Time { return now })
	now = start.Add(4499 * time.Millisecond)
	if err := in.Read(1_000_000); err != nil {
		t.Fatalf("fired before at: %v", err)
	}
	now = start.Add(4500 * time.Millisecond)
	c, ok := AsCrash(in.Read(1))
	if !ok || c.Worker != 1 || c.Spec.At != 4500*time.Millisecond {
		t.Fatalf("at the moment: got %v, want a crash of worker 1", c)
	}
	now = now.Add(time.Hour)
	if err := in.Read(1); err != nil {
		t.Fatalf("fired twice: %v", err)
	}
	if got := in.Fired; len(got) != 1 || got[0].String() != "worker=1,at=4.5s" {
		t.Fatalf("Fired = %v", got)
	}
}

// A timed kill with after-point waits for the point as well as the time.
func TestTimedKillWaitsForItsAfterPoint(t *testing.T) {
	start := time.Unix(0, 0)
	in := NewInjector([]Spec{{Worker: 0, At: time.Second, AfterPoint: "p"}})
	in.Start(start, func() time.Time { return start.Add(time.Minute) })
	if err := in.Read(1); err != nil {
		t.Fatalf("fired before its after-point: %v", err)
	}
	if c, ok := AsCrash(in.Point("p", 1)); !ok || c.Worker != 0 {
		t.Fatalf("the point, time passed already: got %v, want a crash of worker 0", c)
	}

	// The point before the time: the first read once the time has passed.
	now := start
	in = NewInjector([]Spec{{Worker: 0, At: time.Second, AfterPoint: "p"}})
	in.Start(start, func() time.Time { return now })
	if err := in.Point("p", 0); err != nil {
		t.Fatalf("fired at the point before its time: %v", err)
	}
	now = start.Add(time.Second)
	if _, ok := AsCrash(in.Read(1)); !ok {
		t.Fatal("did not fire after point and time")
	}
}

// TestAtPoint: worker=W,at-point=NAME fires at W's own K-th arrival at
// NAME or the coordinator's, never at other workers' arrivals nor at a
// read, and kills W whoever arrives; with after-point, arrivals before
// that point do not count.
func TestAtPoint(t *testing.T) {
	sp, err := Parse("worker=1,at-point=ack,occurrence=2,after-point=done")
	if err != nil {
		t.Fatal(err)
	}
	if got := sp.String(); got != "worker=1,at-point=ack,occurrence=2,after-point=done" {
		t.Errorf("String() = %q", got)
	}
	in := NewInjector([]Spec{sp})
	for i, w := range []int{1, 1, 0} {
		if err := in.Point("ack", w); err != nil {
			t.Fatalf("arrival %d (worker %d) before the after-point fired: %v", i, w, err)
		}
	}
	if err := in.Read(1 << 40); err != nil {
		t.Fatalf("a read fired an at-point kill: %v", err)
	}
	_ = in.Point("done", Coordinator)
	for i, w := range []int{0, 1, 0, 2} {
		if err := in.Point("ack", w); err != nil {
			t.Fatalf("arrival %d after the point (worker %d) fired: %v", i, w, err)
		}
	}
	if c, ok := AsCrash(in.Point("ack", Coordinator)); !ok || c.Worker != 1 || c.Spec != sp {
		t.Fatalf("the second counted arrival (the coordinator's): %v, want a crash of worker 1", c)
	}
	if err := in.Point("ack", 1); err != nil || len(in.Pending()) != 0 {
		t.Fatalf("fired twice: %v, pending %v", err, in.Pending())
	}

	// Without after-point and occurrence: the first arrival of worker 1.
	in = NewInjector([]Spec{{Worker: 1, AtPoint: "ack", Occurrence: 1}})
	if err := in.Point("ack", 0); err != nil {
		t.Fatalf("worker 0's arrival fired: %v", err)
	}
	if c, ok := AsCrash(in.Point("ack", 1)); !ok || c.Worker != 1 {
		t.Fatalf("worker 1's arrival: %v", c)
	}

	for _, c := range []struct {
		spec   Spec
		phrase string // "" = valid
	}{
		{Spec{Worker: 1, AtPoint: "y", Occurrence: 1}, ""},
		{Spec{Worker: 1, AtPoint: "y", Occurrence: 1, AfterPoint: "z"}, ""},
		{Spec{Worker: 1, AtPoint: "x", Occurrence: 1}, `unknown point "x"`},
		{Spec{Worker: 1, AtPoint: "y", Occurrence: 1, AfterPoint: "x"}, `unknown point "x"`},
		{Spec{Worker: 2, AtPoint: "y", Occurrence: 1}, "worker 2 does not exist"},
		{Spec{Worker: 1, AtPoint: "y"}, "occurrence must be 1 or more"},
		{Spec{Worker: 1, AtPoint: "y", Occurrence: 1, AfterRecords: 5}, "exactly one of"},
		{Spec{Worker: 1, AtPoint: PointMidFinish, Occurrence: 1}, "no worker is left"},
	} {
		err := Validate([]Spec{c.spec}, []string{"y", "z"}, 2)
		if (c.phrase == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.phrase) {
			t.Errorf("Validate(%s) = %v, want %q", c.spec, err, c.phrase)
		}
	}
}

// TestPointOnlyWorker: point=NAME,worker=W counts W's passes alone and
// kills W, whoever else passes the point in between.
func TestPointOnlyWorker(t *testing.T) {
	sp, err := Parse("point=p,worker=1,occurrence=2")
	if err != nil {
		t.Fatal(err)
	}
	if got := sp.String(); got != "point=p,worker=1,occurrence=2" {
		t.Errorf("String() = %q", got)
	}
	if err := Validate([]Spec{sp}, []string{"p"}, 1); err == nil {
		t.Errorf("worker 1 of 1 validated")
	}
	in := NewInjector([]Spec{sp})
	for i, w := range []int{0, 1, 0, 0} {
		if err := in.Point("p", w); err != nil {
			t.Fatalf("pass %d (worker %d) fired: %v", i, w, err)
		}
	}
	c, ok := AsCrash(in.Point("p", 1))
	if !ok || c.Worker != 1 {
		t.Fatalf("worker 1's second pass: %v, want a crash of worker 1", c)
	}
	if err := in.Point("p", 1); err != nil {
		t.Fatalf("fired twice: %v", err)
	}
}
