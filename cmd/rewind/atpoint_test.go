package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestAWorkerKillAtAPoint: a worker kill fired at a point is a worker
// kill wherever it lands, in every executor: reached by the coordinator
// (at-point at a coordinator point), by the worker itself (at-point at a
// worker point), or by whichever role reaches the after-point once the
// records are read (often another worker). Each fires (it is not left
// unfired), is billed as worker 1's kill and recovered, and the result
// equals the reference's.
func TestAWorkerKillAtAPoint(t *testing.T) {
	input := []string{"--input", "gen:records=20000,keys=50,rate=100000"}
	j, err := job.Build("keyed-count", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	want := referenceOutput(t, j, input)
	for _, c := range []struct{ exec, fail string }{
		{"recordwise", "worker=1,at-point=checkpoint.after-metadata"},
		{"recordwise", "worker=1,at-point=checkpoint.before-ack,after-point=checkpoint.after-metadata"},
		{"recordwise", "worker=1,after-records=1,after-point=checkpoint.after-snapshot"},
		{"microbatch", "worker=1,at-point=batch.after-offsets,occurrence=2"},
		{"microbatch", "worker=1,at-point=batch.mid-run,after-point=batch.after-commit"},
		{"microbatch", "worker=1,after-records=1,after-point=batch.mid-run"},
		{"diskphase", "worker=1,at-point=coordinator.after-ledger,occurrence=3"},
		{"diskphase", "worker=1,at-point=unit.mid-read,occurrence=2"},
		{"diskphase", "worker=1,after-records=1,after-point=unit.mid-read"},
	} {
		what := c.exec + " --fail " + c.fail
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"run", "--executor", c.exec, "--output", out, "--storage", "file://" + t.TempDir(),
			"--summary", "json", "--fail", c.fail}, input...)
		args = append(args, quickSettings[c.exec]...)
		code, stdout, stderr := rewind(t, args...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", what, code, stderr)
			continue
		}
		var s struct {
			Crashes    int      `json:"crashes"`
			Unfired    []string `json:"unfired_faults"`
			Recoveries []struct {
				Cause string `json:"cause"`
			} `json:"recoveries"`
		}
		if err := json.Unmarshal([]byte(lastLine(stdout)), &s); err != nil {
			t.Fatalf("%s: summary is not JSON: %v", what, err)
		}
		if s.Crashes != 1 || len(s.Unfired) != 0 || len(s.Recoveries) != 1 {
			t.Errorf("%s: %d crashes, unfired %v, %d recoveries; want the one kill, recovered", what, s.Crashes, s.Unfired, len(s.Recoveries))
		} else if spec, err := fault.Parse(c.fail); err != nil {
			t.Fatal(err)
		} else if cause := s.Recoveries[0].Cause; !strings.HasPrefix(cause, "worker 1 killed ("+spec.String()) && !strings.HasPrefix(cause, "worker 1 crashed at "+spec.String()) {
			// (diskphase says "crashed at" of a kill its own attempt reached)
			t.Errorf("%s: the recovery's cause is %q, want worker 1's kill by %s", what, cause, spec)
		}
		got, _, err := sink.Resolve(out, j.Output)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d := got.Diff(want, 5); d != "" {
			t.Errorf("%s differs from the reference:\n%s", what, d)
		}
	}
}
