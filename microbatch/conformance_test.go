package microbatch

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// TestConformance runs the runtest conformance suite on the micro-batch
// executor: its resumed process follows one that died after committing
// batches (a crash with no restart), and every re-delivered batch must
// hold the rows of its first delivery.
func TestConformance(t *testing.T) {
	runtest.Conformance(t, runtest.Subject{
		Executor: Executor{}, Kind: "batch", Package: "./microbatch/", Dir: fastDir,
		Schedules: runtest.Schedules{Flags: scheduleFlags, Short: 50, Parallel: true, Draw: drawSchedule},
		Resume:    runtest.Resume{Event: "recovery", Records: resumeRecords, Die: dieAfterCommits, Resumed: resume},
		Listing:   listing(),
	})
}

// drawSchedule draws several crashes per run at random points and random
// workers (kills after a random number of records read), a random job,
// sink mode, parallelism and batch size. Every re-delivered batch must
// hold the rows of its first delivery, and every recovery is billed in
// full.
func drawSchedule(seed int64) runtest.Schedule {
	jobs := job.Names()
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
	return runtest.Schedule{
		What: fmt.Sprintf("job %s, sink %s, parallelism %d, %d records, disorder %d, batches of %d, faults %v",
			j, mode, par, records, disorder, maxBatch, fails),
		Run: func(t *testing.T) runtest.Result {
			sc := &scenario{job: j, inputs: inputs, mode: mode, parallelism: par, params: &params,
				fails: fails, opts: Options{MaxBatchRecords: maxBatch}, ledger: newBatchLedger()}
			o := sc.execute(t)
			return runtest.Result{Outcome: o.result().Outcome, Check: func(t testing.TB, what string) {
				o.checkConflicts(t, what)
				o.checkRecoveries(t, what, sc.ledger)
			}}
		},
	}
}

const resumeRecords = 4000

// dieAfterCommits runs a process that crashes after committing batches
// and does not restart.
func dieAfterCommits(t *testing.T, storage, output string) {
	sc := &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", resumeRecords, 5), storage: storage, output: output,
		fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: 3}},
		opts:  Options{MaxBatchRecords: 400, RunID: "resumed-bill"}}
	sc.opts.hooks.noRestart = true
	if o := sc.execute(t); o.err == nil {
		t.Fatal("first process: want the injected crash to end it")
	}
}

// resume runs a --resume process of the run dieAfterCommits left (a run
// id storage does not hold when fresh).
func resume(t *testing.T, storage, output string, progress io.Writer, fresh bool) runtest.Result {
	runID := "resumed-bill"
	if fresh {
		runID = "nothing-stored"
	}
	sc := &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", resumeRecords, 5), storage: storage, output: output,
		resumed: true, progress: progress, opts: Options{MaxBatchRecords: 400, RunID: runID}}
	return sc.execute(t).result()
}

// listing holds committed batches, one whose commit did not land and one
// planned ahead of it, and another executor's object.
func listing() runtest.Listing {
	pre := runPrefix("keyed-count", "r1")
	const run = "keyed-count/r1"
	return runtest.Listing{
		Objects: []storage.Object{
			{Name: pre + commitName(0), Size: 10},
			{Name: pre + commitName(1), Size: 10},
			{Name: pre + offsetsName(0), Size: 20},
			{Name: pre + offsetsName(1), Size: 20},
			{Name: pre + offsetsName(2), Size: 20},
			{Name: pre + manifestName(1), Size: 5},
			{Name: pre + stateObjectName(1, "count"), Size: 100},
			{Name: pre + stateObjectName(2, "count"), Size: 100},
			{Name: pre + offsetsName(3), Size: 20}, // written ahead beside commits/2, which did not land
			{Name: "recordwise/keyed-count/r1/chk-00000000000000000001/_metadata", Size: 1},
		},
		Want: []runtest.WantPoint{
			{Run: run, ID: 0, Complete: true, Objects: 2, Bytes: 30, Status: "committed"},
			{Run: run, ID: 1, Complete: true, Objects: 4, Bytes: 135, Status: "committed"},
			{Run: run, ID: 2, Complete: false, Objects: 2, Bytes: 120, Status: "re-runs it with the logged offsets"},
			{Run: run, ID: 3, Complete: false, Objects: 1, Bytes: 20, Status: "written ahead beside batch 2's commit"},
		},
	}
}
