package microbatch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// checkCrashRun adds the crash-specific judgement to outcome.check: every
// armed fault fired, each is counted as a crash with a recovery
// (runtest.CheckCrashes), and checkRecoveries.
func checkCrashRun(t *testing.T, what string, sc *scenario, o *outcome, mustFire bool) {
	t.Helper()
	o.check(t, what)
	if mustFire {
		if p := o.faults.Pending(); len(p) > 0 {
			t.Fatalf("%s: faults never fired: %v", what, p)
		}
	}
	runtest.CheckCrashes(t, what, o.result().Outcome)
	o.checkRecoveries(t, what, sc.ledger)
}

// occurrenceFor returns the occurrence of point that falls in batch b (0
// based) at parallelism par: the mid-run point is reached by every worker.
func occurrenceFor(point string, b, par int) int {
	if point == PointMidRun {
		return b*par + 1
	}
	return b + 1
}

// TestCrashAtEveryPoint: for every named crash point and every built-in
// job, crash there once, and twice in a row, restart, finish the bounded
// input, and compare with the oracle. Sink modes rotate so that every
// (point, mode) and (job, mode) pair is covered.
func TestCrashAtEveryPoint(t *testing.T) {
	jobs := job.Names()
	for pi, point := range failPoints {
		for ji, j := range jobs {
			for _, twice := range []bool{false, true} {
				mode := sink.Modes[(pi+ji+map[bool]int{false: 0, true: 1}[twice])%len(sink.Modes)]
				name := fmt.Sprintf("%s/%s/%s/once", point, j, mode)
				if twice {
					name = strings.TrimSuffix(name, "once") + "twice"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					par := 2
					occ := occurrenceFor(point, 2, par)
					fails := []fault.Spec{{Worker: -1, Point: point, Occurrence: occ}}
					if twice {
						fails = append(fails, fault.Spec{Worker: -1, Point: point, Occurrence: occ + 1})
					}
					records, batch := 3000, int64(500)
					if raceEnabled {
						records, batch = 1800, 360
					}
					sc := &scenario{job: j, inputs: defaultInputs(j, records, int64(11+pi)), mode: mode, parallelism: par,
						fails: fails, opts: Options{MaxBatchRecords: batch}, ledger: newBatchLedger()}
					o := sc.execute(t)
					checkCrashRun(t, name, sc, o, true)
				})
			}
		}
	}
}
