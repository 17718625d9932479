package microbatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestMatchesOracleWithoutCrashes runs every built-in job under every sink
// mode, at parallelism 1 and 3, with small batches.
func TestMatchesOracleWithoutCrashes(t *testing.T) {
	for _, j := range job.Names() {
		for _, mode := range sink.Modes {
			for _, par := range []int{1, 3} {
				name := fmt.Sprintf("%s/%s/p%d", j, mode, par)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					sc := &scenario{job: j, inputs: defaultInputs(j, 4000, 7), mode: mode, parallelism: par,
						opts: Options{MaxBatchRecords: 700}}
					o := sc.execute(t)
					o.check(t, name)
					if o.stats.DuplicateRows != 0 {
						t.Fatalf("%d duplicates without a crash", o.stats.DuplicateRows)
					}
					if o.summary.Checkpoints.Completed < 5 {
						t.Fatalf("only %d batches committed; want several", o.summary.Checkpoints.Completed)
					}
				})
			}
		}
	}
}

// TestPlansAheadWhenTheTriggerIsDue: with a trigger shorter than a batch,
// batches are planned while the one before them commits (their offsets
// entry written beside its commit entry), and the output is still exact.
// The crash tests run at the same trigger, so their points before and in
// the offsets log mostly fall in such plans.
func TestPlansAheadWhenTheTriggerIsDue(t *testing.T) {
	var progress bytes.Buffer
	sc := &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", 4000, 7), mode: sink.Transactional,
		progress: &progress, opts: Options{MaxBatchRecords: 300}}
	o := sc.execute(t)
	o.check(t, "planned ahead")
	ahead, batches := 0, 0
	for line := range strings.Lines(progress.String()) {
		var ev struct {
			Event        string `json:"event"`
			PlannedAhead bool   `json:"planned_ahead"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		if ev.Event == "batch" {
			batches++
			if ev.PlannedAhead {
				ahead++
			}
		}
	}
	if batches < 10 || ahead == 0 {
		t.Fatalf("%d of %d batches planned ahead; want some of at least 10", ahead, batches)
	}
	t.Logf("%d of %d batches planned ahead", ahead, batches)
}
