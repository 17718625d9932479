package microbatch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestTimedKillModelledReplacement: a worker killed at a time, with the
// heartbeat timeout and the replacement modelled, bills both as modelled
// figures at least as long as configured, reads the committed state back
// (and says how many bytes), and the output is exact.
func TestTimedKillModelledReplacement(t *testing.T) {
	inputs := runtest.Gen{Records: 30000, Keys: 200, Seed: 23, Rate: 100000}.Inputs("keyed-count")
	sc := &scenario{job: "keyed-count", inputs: inputs, mode: sink.Idempotent, parallelism: 2,
		fails: []fault.Spec{{Worker: 0, At: 100 * time.Millisecond}}, detect: 200 * time.Millisecond, acquire: 100 * time.Millisecond}
	o := sc.execute(t)
	checkCrashRun(t, "timed kill", sc, o, true)
	if len(o.summary.Recoveries) != 1 {
		t.Fatalf("%d recoveries, want 1: %+v", len(o.summary.Recoveries), o.summary.Recoveries)
	}
	r := o.summary.Recoveries[0]
	if r.DetectMs == nil || *r.DetectMs < 200 || r.AcquireMs == nil || *r.AcquireMs < 100 || !slices.Equal(r.Modelled, []string{"detect", "acquire"}) {
		t.Fatalf("bill %+v: want detect >= 200 ms, acquire >= 100 ms, both modelled", r)
	}
	if r.AtMs == nil || *r.AtMs < 100 {
		t.Fatalf("at_ms %v, want >= 100", r.AtMs)
	}
	if r.RestoreBytes == nil || *r.RestoreBytes <= 0 || r.RestoreMs == nil {
		t.Fatalf("restore %v ms, %v bytes; want the committed state's bytes (a batch commits every few ms)", r.RestoreMs, r.RestoreBytes)
	}
}
