package microbatch

import (
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestKillsDuringARepairAreBilled lands kills inside the first worker
// repair (testHooks.onRepair): before it scans for the dead workers (it
// replaces those workers too, and bills them: a kill landing between the
// repair noticing a death and scanning was repaired but never billed when
// no later repair came, seed 126 of the conformance schedules under load),
// of a worker already down, and of a worker the repair has just replaced
// (the next repair replaces and bills it). Every crash ends with a
// complete bill and the result is the reference's.
func TestKillsDuringARepairAreBilled(t *testing.T) {
	for _, tc := range []struct {
		name                string
		kills               map[string][]int // stage of the first repair: workers killed there
		crashes, minRepairs int
	}{
		{name: "BeforeTheScan", kills: map[string][]int{"scan": {1, 0}}, crashes: 3, minRepairs: 1},
		{name: "AfterTheReplacements", kills: map[string][]int{"replaced": {2}}, crashes: 2, minRepairs: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repairs := 0
			hook := func(stage string, kill func(int)) {
				if stage == "scan" {
					repairs++
				}
				if repairs == 1 {
					for _, w := range tc.kills[stage] {
						kill(w)
					}
				}
			}
			sc := &scenario{job: "keyed-count", mode: sink.Idempotent, parallelism: 3,
				inputs: map[string]string{job.DefaultInput: "gen:records=6000,keys=16,partitions=3,rate=30000,seed=3"},
				fails:  []fault.Spec{{Worker: 0, AfterRecords: 1500}},
				opts:   Options{Trigger: 20 * time.Millisecond, hooks: testHooks{onRepair: hook}}}
			o := sc.execute(t)
			if o.err != nil {
				t.Fatal(o.err)
			}
			o.check(t, tc.name)
			if repairs < tc.minRepairs {
				t.Fatalf("%d repairs ran, want at least %d", repairs, tc.minRepairs)
			}
			causes := make([]string, len(o.summary.Recoveries))
			for i, r := range o.summary.Recoveries {
				causes[i] = r.Cause
				if r.DetectMs == nil || r.RestoreMs == nil || r.ReprocessedRecords == nil {
					t.Errorf("recovery %d (%s) is incomplete: %+v", i, r.Cause, r)
				}
			}
			if len(causes) != tc.crashes {
				t.Fatalf("recoveries %q, want %d", causes, tc.crashes)
			}
			if tc.name == "BeforeTheScan" && !strings.Contains(strings.Join(causes, "; "), "while already down") {
				t.Fatalf("recoveries %q: none is the kill of worker 0 while already down", causes)
			}
		})
	}
}
