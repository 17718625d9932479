package fault

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	good := map[string]Spec{
		"worker=1,after-records=500":       {Worker: 1, AfterRecords: 500},
		"point=batch.mid-run":              {Worker: -1, Point: "batch.mid-run", Occurrence: 1},
		"point=batch.mid-run,occurrence=3": {Worker: -1, Point: "batch.mid-run", Occurrence: 3},
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
		"point=a,worker=1":                      "cannot be combined",
		"occurrence=2,worker=1,after-records=3": "goes with point",
		"colour=red":                            "unknown key",
		"point":                                 "not key=value",
		"point=a,point=b":                       "twice",
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

func TestValidate(t *testing.T) {
	specs := []Spec{{Worker: -1, Point: "x", Occurrence: 1}}
	if err := Validate(specs, []string{"y"}, 2); err == nil || !strings.Contains(err.Error(), "--list-fail-points") {
		t.Fatalf("unknown point: %v", err)
	}
	if err := Validate([]Spec{{Worker: 2, AfterRecords: 1}}, nil, 2); err == nil {
		t.Fatal("worker 2 of 2 accepted")
	}
}
