package recordwise

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// TestConformance runs the runtest conformance suite on the record-wise
// executor: its resumed process follows one stopped at its first periodic
// checkpoint, whose source positions are what resumed_from covers. Its
// schedules run one at a time: they pace their inputs and race checkpoints
// against crashes, which a loaded machine would skew. Faults that fire
// within a crash's detection delay join that crash.
func TestConformance(t *testing.T) {
	runtest.Conformance(t, runtest.Subject{
		Executor: Executor{}, Kind: "checkpoint", Package: "./recordwise/", Dir: fastDir,
		Schedules: runtest.Schedules{Flags: scheduleFlags, Coalesce: true, Draw: drawSchedule},
		Resume:    runtest.Resume{Event: "recovery", Records: resumeRecords, Die: stopAtFirstCheckpoint, Resumed: resume},
		Listing:   listing(),
	})
}

// drawSchedule draws a job, barrier setting, sink, parallelism, input
// size and pace, checkpoint interval, sometimes a detection delay, and one
// to three faults (worker kills at random record counts, named points at
// random occurrences).
func drawSchedule(seed int64) runtest.Schedule {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	j := jobs[r.IntN(len(jobs))]
	records := 2000 + r.IntN(8)*1000
	rate := []int{0, 100000, 200000}[r.IntN(3)]
	p := []int{1, 2, 2, 3, 5}[r.IntN(5)] // 5 > the 4 partitions: an idle source subtask
	sc := &scenario{
		job: j, barriers: modes[r.IntN(len(modes))], mode: sinks[r.IntN(len(sinks))], parallelism: p,
		inputs:   inputs(j, records, rate, seed),
		interval: time.Duration(1+r.IntN(5)) * time.Millisecond,
	}
	if r.IntN(4) == 0 {
		sc.detect = time.Duration(r.IntN(5)) * time.Millisecond
	}
	nf := 1 + r.IntN(3)
	for i := 0; i < nf; i++ {
		if r.IntN(2) == 0 {
			sc.fails = append(sc.fails, kill(r.IntN(p), 1+int64(r.IntN(records))))
		} else {
			sc.fails = append(sc.fails, at(failPoints[r.IntN(len(failPoints))], 1+r.IntN(4)))
		}
	}
	return runtest.Schedule{
		What: fmt.Sprintf("%s, %d records at %d/s, checkpoints every %s, detect delay %s", sc, records, rate, sc.interval, sc.detect),
		// The suite's crash bill includes checkRecovered's.
		Run: func(t *testing.T) runtest.Result { return runtest.Result{Outcome: sc.execute(t).judged().Outcome} },
	}
}

const resumeRecords = 4000

// stopAtFirstCheckpoint runs a process that is stopped once its first
// periodic checkpoint is complete (not after a count of them: a loaded
// machine may complete only the final one before the paced input ends).
func stopAtFirstCheckpoint(t *testing.T, storage, output string) {
	sc := &scenario{job: "keyed-count", mode: sink.Transactional, inputs: inputs("keyed-count", resumeRecords, 4000, 5), // one second of input
		storage: storage, output: output, measureOnly: true,
		stopWhen: func(cs CheckpointStats) bool { return cs.Status == "completed" && !cs.Final }}
	sc.opts.RunID = "resumed-bill"
	if o := sc.executeRaw(t); o.err != nil {
		t.Fatal(o.err)
	} else if o.summary.Checkpoints.Completed == 0 {
		t.Fatal("the first process completed no checkpoint")
	}
}

// resume runs a --resume process of the run stopAtFirstCheckpoint left, or
// of a run storage does not hold (on unpaced input) when fresh.
func resume(t *testing.T, storage, output string, progress io.Writer, fresh bool) runtest.Result {
	sc := &scenario{job: "keyed-count", mode: sink.Transactional, inputs: inputs("keyed-count", resumeRecords, 4000, 5),
		storage: storage, output: output, resumed: true, progress: progress}
	sc.opts.RunID = "resumed-bill"
	if fresh {
		sc.inputs, sc.opts.RunID = inputs("keyed-count", resumeRecords, 0, 5), "nothing-stored"
	}
	return sc.execute(t).judged()
}

// listing holds a complete checkpoint and a later one with parts but no
// metadata, and an object of no checkpoint.
func listing() runtest.Listing {
	pre := runPrefix("windowed-sum", "r7")
	const run = "windowed-sum/r7"
	return runtest.Listing{
		Objects: []storage.Object{
			{Name: pre + metadataKey(1), Size: 50},
			{Name: pre + partKey(1, "window-0"), Size: 10},
			{Name: pre + opStateKey(1, "window-0", "window"), Size: 1000},
			{Name: pre + partKey(2, "window-0"), Size: 10},
			{Name: pre + channelsKey(2, "window-0"), Size: 300},
			{Name: pre + "unrelated", Size: 1},
		},
		Want: []runtest.WantPoint{
			{Run: run, ID: 1, Complete: true, Objects: 3, Bytes: 1060, Status: "1 parts"},
			{Run: run, ID: 2, Complete: false, Objects: 2, Bytes: 310, Status: "no metadata: not a recovery point"},
		},
	}
}
