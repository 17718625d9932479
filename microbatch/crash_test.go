package microbatch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// checkCrashRun adds the crash-specific judgement to outcome.check: every
// armed fault fired, each is counted as a crash with a recovery, and every
// re-delivered batch held the rows of its first delivery.
func checkCrashRun(t *testing.T, what string, sc *scenario, o *outcome, mustFire bool) {
	t.Helper()
	o.check(t, what)
	if mustFire {
		if p := o.faults.Pending(); len(p) > 0 {
			t.Fatalf("%s: faults never fired: %v", what, p)
		}
	}
	fired := len(o.faults.Fired)
	if o.summary.Crashes != fired || len(o.summary.Recoveries) != fired {
		t.Fatalf("%s: %d faults fired, summary reports %d crashes and %d recoveries", what, fired, o.summary.Crashes, len(o.summary.Recoveries))
	}
	for i, r := range o.summary.Recoveries {
		if strings.Contains(r.Cause, "no recovery ran") {
			continue
		}
		if r.DetectMs == nil || r.RestoreMs == nil || r.ReprocessedRecords == nil {
			t.Fatalf("%s: recovery %d (%s) is incomplete: %+v", what, i, r.Cause, r)
		}
	}
	if l := sc.ledger; l != nil && len(l.mismatch) > 0 {
		t.Fatalf("%s: a re-delivered batch differs from its first delivery: %s", what, strings.Join(l.mismatch, "; "))
	}
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

// TestRandomCrashSchedules runs seeded random schedules: several crashes
// per run at random points and random workers (kills after a random number
// of records read), random jobs, sink modes, parallelism and batch sizes.
// -mb.schedules sets how many; -mb.seed reruns one. Every failure names its
// seed.
func TestRandomCrashSchedules(t *testing.T) {
	n := *flagSchedules
	if testing.Short() && n > 50 {
		n = 50
	}
	seeds := make([]int64, 0, n)
	if *flagSeed != 0 {
		seeds = append(seeds, *flagSeed)
	} else {
		for i := range n {
			seeds = append(seeds, int64(i+1))
		}
	}
	jobs := job.Names()
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
			j := jobs[rng.IntN(len(jobs))]
			mode := sink.Modes[rng.IntN(len(sink.Modes))]
			par := 1 + rng.IntN(3)
			records := 1500 + rng.IntN(2500)
			maxBatch := int64(200 + rng.IntN(800))
			if raceEnabled {
				records /= 2 // fewer batches: the race detector multiplies each one's cost
			}
			var fails []fault.Spec
			for k := rng.IntN(4) + 1; k > 0; k-- {
				if rng.IntN(3) == 0 {
					fails = append(fails, fault.Spec{Worker: rng.IntN(par), AfterRecords: 1 + int64(rng.IntN(2*records))})
				} else {
					fails = append(fails, fault.Spec{Worker: -1, Point: failPoints[rng.IntN(len(failPoints))], Occurrence: 1 + rng.IntN(8)})
				}
			}
			// Event time may run backwards by up to `disorder` within a
			// partition; the watermark allows for it, so no row is late.
			disorder := []int64{0, 7, 40}[rng.IntN(3)]
			inputs := defaultInputs(j, records, seed)
			for k := range inputs {
				inputs[k] += fmt.Sprintf(",disorder=%d", disorder)
			}
			params := job.Params{Window: 50, JoinWindow: 200, MaxDisorder: disorder}
			sc := &scenario{job: j, inputs: inputs, mode: mode, parallelism: par, params: &params,
				fails: fails, opts: Options{MaxBatchRecords: maxBatch}, ledger: newBatchLedger()}
			what := fmt.Sprintf("seed %d (job %s, sink %s, parallelism %d, %d records, disorder %d, batches of %d, faults %v; rerun with -mb.seed=%d)",
				seed, j, mode, par, records, disorder, maxBatch, fails, seed)
			o := sc.execute(t)
			checkCrashRun(t, what, sc, o, false)
		})
	}
}
