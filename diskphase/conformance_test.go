package diskphase

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

// TestConformance runs the runtest conformance suite on the disk-phase
// executor: its resumed process follows one stopped once two finite jobs
// are committed, and the records of the finished map units in the ledger
// are what resumed_from covers.
func TestConformance(t *testing.T) {
	runtest.Conformance(t, runtest.Subject{
		Executor: Executor{}, Kind: "finite job", Package: "./diskphase/", Dir: fastDir,
		Schedules: runtest.Schedules{Flags: scheduleFlags, Parallel: true, Draw: drawSchedule},
		Resume:    runtest.Resume{Event: "coordinator_restarted", Records: resumeRecords, Die: stopAfterCommits, Resumed: resume},
		Listing:   listing(),
	})
}

// drawSchedule draws a job, a sink, a parallelism, an input size, a
// finite-job size, a read batch, a chunk size small enough that map units
// write several chunks a partition, and one to three faults from worker
// kills and every named point (coordinator ones included). Beyond the suite's
// checks, every unit re-ran exactly as often as it was interrupted or lost
// its files (checkReruns), nothing materialised is left, and no row is
// duplicated unless an append sink crashed mid-commit.
func drawSchedule(seed int64) runtest.Schedule {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	name := job.Names()[rng.IntN(len(job.Names()))]
	mode := modes[rng.IntN(len(modes))]
	par := 1 + rng.IntN(3)
	records := 2000 + rng.IntN(2000)
	var jobRecords int64
	if k := rng.IntN(4); k > 0 {
		jobRecords = int64(records / k)
	}
	var fails []fault.Spec
	for range 1 + rng.IntN(3) {
		if rng.IntN(2) == 0 {
			fails = append(fails, fault.Spec{Worker: rng.IntN(par), AfterRecords: 1 + rng.Int64N(int64(records))})
		} else {
			fails = append(fails, fault.Spec{Point: failPoints[rng.IntN(len(failPoints))], Occurrence: 1 + rng.IntN(4)})
		}
	}
	readBatch := 128 + rng.IntN(512)
	// Drawn last, so the draws above are what they were for every seed.
	chunkRows := 64 + rng.IntN(768)
	return runtest.Schedule{
		What: fmt.Sprintf("job=%s mode=%s parallelism=%d records=%d job-records=%d chunk-rows=%d fails=%v", name, mode, par, records, jobRecords, chunkRows, fails),
		Run: func(t *testing.T) runtest.Result {
			sc := &scenario{job: name, inputs: smallInputs(name, records, seed), mode: mode, parallelism: par,
				jobRecords: jobRecords, fails: fails, readBatch: readBatch, chunkRows: chunkRows}
			o := sc.execute(t)
			return runtest.Result{Outcome: o.result().Outcome, Check: func(t testing.TB, what string) {
				o.checkOutput(t, what)
				o.checkReruns(t, what)
				midCommit := false
				for _, f := range o.env.Faults.Fired {
					midCommit = midCommit || f.Point == pointMidCommit
				}
				if !(mode == sink.Append && midCommit) {
					o.checkNoDuplicates(t, what)
				}
			}}
		},
	}
}

const resumeRecords = 4000

// resumeInputs are paced, so the first process is stopped mid-input.
func resumeInputs() map[string]string {
	return runtest.Gen{Records: resumeRecords, Keys: 150, Seed: 5, Rate: 8000}.Inputs("keyed-count")
}

// stopAfterCommits runs a process that is stopped once two finite jobs are
// committed, leaving its run unfinished.
func stopAfterCommits(t *testing.T, storage, output string) {
	sc := &scenario{job: "keyed-count", inputs: resumeInputs(), storage: storage, output: output, runID: "resumed-bill",
		jobRecords: 500, stopAfterCommits: 2}
	if o := sc.execute(t); o.err != nil {
		t.Fatal(o.err)
	} else if o.summary.Checkpoints.Completed < 2 {
		t.Fatalf("the first process committed %d finite jobs, want 2 or more", o.summary.Checkpoints.Completed)
	}
}

// resume runs a --resume process of the run stopAfterCommits left, or of
// a run storage does not hold when fresh.
func resume(t *testing.T, storage, output string, progress io.Writer, fresh bool) runtest.Result {
	sc := &scenario{job: "keyed-count", inputs: resumeInputs(), storage: storage, output: output, runID: "resumed-bill",
		jobRecords: 500, resumed: true, progress: progress}
	if fresh {
		sc.inputs, sc.runID = smallInputs("keyed-count", resumeRecords, 5), "nothing-stored"
	}
	return sc.execute(t).result()
}

// listing holds a committed finite job and one interrupted with two map
// units and one reduce unit in its ledger.
func listing() runtest.Listing {
	n := newNames("etl", "r3")
	const run = "etl/r3"
	return runtest.Listing{
		Objects: []storage.Object{
			{Name: n.runPlan(), Size: 9},
			{Name: n.coord(0), Size: 0},
			{Name: n.jobPlan(0), Size: 10},
			{Name: n.ledger(UnitID{Job: 0, Kind: kindMap, Index: 0}), Size: 10},
			{Name: n.success(0), Size: 10},
			{Name: n.jobPlan(1), Size: 10},
			{Name: n.ledger(UnitID{Job: 1, Kind: kindMap, Index: 0}), Size: 10},
			{Name: n.ledger(UnitID{Job: 1, Kind: kindMap, Index: 1}), Size: 10},
			{Name: n.ledger(UnitID{Job: 1, Kind: kindReduce, Index: 0}), Size: 10},
			{Name: n.mapFile(1, 0, 0, 1, 0), Size: 500},
		},
		Want: []runtest.WantPoint{
			{Run: run, ID: 0, Complete: true, Objects: 3, Bytes: 30, Status: "committed (_SUCCESS)"},
			{Run: run, ID: 1, Complete: false, Objects: 5, Bytes: 540, Status: "2 map and 1 reduce units"},
		},
	}
}
