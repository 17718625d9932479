package microbatch

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// twoProcessRun runs a job as two processes sharing durable storage, the
// output and the outside world's ledger of delivered batch ids: the first
// crashes for good at `point` (occurrence occ); the second resumes the run
// by its id with a larger --max-batch-records, as an operator restarting a
// job with new settings would. It returns the second run's outcome and
// every batch attempt's positions.
func twoProcessRun(t *testing.T, jobName string, late bool, point string, occ int) (*outcome, map[int64][]string) {
	t.Helper()
	storage := "file://" + fastDir(t)
	output := filepath.Join(fastDir(t), "out")
	ledger := newBatchLedger()
	var mu sync.Mutex
	attempts := map[int64][]string{}
	hooks := testHooks{lateOffsets: late, onRun: func(e offsetsEntry, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		attempts[e.Batch] = append(attempts[e.Batch], fmt.Sprint(e.Ranges))
	}}
	inputs := defaultInputs(jobName, 4000, 3)
	first := &scenario{job: jobName, inputs: inputs, storage: storage, output: output, ledger: ledger, dedup: true,
		fails: []fault.Spec{{Worker: -1, Point: point, Occurrence: occ}},
		opts:  Options{MaxBatchRecords: 400, RunID: "two-process", hooks: hooks}}
	first.opts.hooks.noRestart = true
	o1 := first.execute(t)
	if _, ok := fault.AsCrash(o1.err); !ok {
		t.Fatalf("first process: want an injected crash, got %v", o1.err)
	}
	second := &scenario{job: jobName, inputs: inputs, storage: storage, output: output, ledger: ledger, dedup: true,
		opts: Options{MaxBatchRecords: 1500, RunID: "two-process", hooks: hooks}}
	return second.execute(t), attempts
}

// TestLateOffsetsVariantIsCaught is the proof that the crash tests can
// catch the bug they exist for. The correct protocol logs offsets/N before
// any work on batch N, so a restart re-runs N with exactly its positions
// and re-delivers identical rows under batch id N; a sink that skips batch
// ids it already has (as Spark's file sink does) stays exact. The broken
// variant logs offsets/N only after the batch ran and reached the sink: a
// crash in between makes the restart plan batch N again with new
// positions, the sink skips the "already delivered" batch N, and the rows
// in the difference are lost.
func TestLateOffsetsVariantIsCaught(t *testing.T) {
	for _, jobName := range []string{"etl", "keyed-count"} {
		t.Run(jobName, func(t *testing.T) {
			// Correct protocol: the same scenario passes.
			o, attempts := twoProcessRun(t, jobName, false, PointAfterSink, 3)
			o.check(t, "correct protocol, crash after the sink of batch 2")
			for b, rs := range attempts {
				for _, r := range rs[1:] {
					if r != rs[0] {
						t.Fatalf("correct protocol: batch %d ran with positions %s, then %s", b, rs[0], r)
					}
				}
			}
			if len(attempts[2]) != 2 {
				t.Fatalf("batch 2 ran %d times, want 2 (the crash, then the re-run)", len(attempts[2]))
			}

			// Broken protocol: the same check must fail.
			o, attempts = twoProcessRun(t, jobName, true, PointAfterSink, 3)
			replanned := len(attempts[2]) == 2 && attempts[2][0] != attempts[2][1]
			if !replanned {
				t.Fatalf("late offsets: batch 2 attempts %v: the restart should have planned batch 2 anew", attempts[2])
			}
			diff := o.table.Diff(o.want.Table, 3)
			if jobName == "etl" && diff == "" {
				t.Fatal("late offsets: the output equals the oracle; the crash test would not catch the bug")
			}
			t.Logf("late offsets caught: batch 2 planned as %s, then as %s; output vs oracle: %s",
				attempts[2][0], attempts[2][1], firstLine(diff))
		})
	}
}

func firstLine(s string) string {
	if s == "" {
		return "equal"
	}
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestRerunIsDeterministic: after crashes at every step of one batch, the
// re-runs deliver exactly the rows of the first attempt to every sink
// subtask (checked by the ledger), and every attempt of a batch id used the
// same positions.
func TestRerunIsDeterministic(t *testing.T) {
	for _, jobName := range []string{"keyed-count", "windowed-sum", "join"} {
		t.Run(jobName, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			attempts := map[int64][]string{}
			var fails []fault.Spec
			for _, p := range []string{PointAfterSink, PointCommitMidWrite, PointSinkMidWrite} {
				fails = append(fails, fault.Spec{Worker: -1, Point: p, Occurrence: 2})
			}
			fails = append(fails, fault.Spec{Worker: -1, Point: PointMidRun, Occurrence: 9})
			sc := &scenario{job: jobName, inputs: defaultInputs(jobName, 3000, 5), mode: sink.Transactional, parallelism: 3,
				fails: fails, ledger: newBatchLedger(),
				opts: Options{MaxBatchRecords: 400, hooks: testHooks{onRun: func(e offsetsEntry, _ bool) {
					mu.Lock()
					defer mu.Unlock()
					attempts[e.Batch] = append(attempts[e.Batch], fmt.Sprint(e.Ranges))
				}}}}
			o := sc.execute(t)
			checkCrashRun(t, jobName, sc, o, true)
			if sc.ledger.redeliver == 0 {
				t.Fatal("no batch was re-delivered; the test proves nothing")
			}
			for b, rs := range attempts {
				for _, r := range rs {
					if !reflect.DeepEqual(r, rs[0]) {
						t.Fatalf("batch %d ran with positions %s, then %s", b, rs[0], r)
					}
				}
			}
		})
	}
}

// TestRestartPlansAgainAnEntryWrittenAhead: a process dies with batch 2
// sealed and not committed, and an offsets entry for batch 3 written ahead
// of its commit (as when offsets/3 lands and commits/2 does not). The
// restart re-runs batch 2 with its logged positions, plans batch 3 anew
// (the stale entry, which no work used, is replaced), and the output is
// exact; the sink drops batch ids it already has, so a batch 3 delivered
// from the stale entry would show in the output.
func TestRestartPlansAgainAnEntryWrittenAhead(t *testing.T) {
	const jobName = "etl"
	dir := fastDir(t)
	output := filepath.Join(fastDir(t), "out")
	ledger := newBatchLedger()
	var mu sync.Mutex
	attempts := map[int64][]string{}
	hooks := testHooks{onRun: func(e offsetsEntry, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		attempts[e.Batch] = append(attempts[e.Batch], fmt.Sprint(e.Ranges))
	}}
	inputs := defaultInputs(jobName, 4000, 3)
	first := &scenario{job: jobName, inputs: inputs, storage: "file://" + dir, output: output, ledger: ledger, dedup: true,
		fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: 3}},
		opts:  Options{MaxBatchRecords: 400, RunID: "ahead", hooks: hooks}}
	first.opts.hooks.noRestart = true
	if o := first.execute(t); o.err == nil {
		t.Fatal("first process: want an injected crash")
	}

	// Write offsets/3 as if planned ahead: it starts where batch 2 ends.
	ctx := context.Background()
	st, err := storage.Open(ctx, "file://"+dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := runPrefix(jobName, "ahead")
	data, err := st.Get(ctx, prefix+offsetsName(2))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := decodeOffsets(data)
	if err != nil {
		t.Fatal(err)
	}
	stale := *e2
	stale.Batch, stale.WatermarkBefore = 3, e2.Watermark
	stale.Ranges = nil
	for _, r := range e2.Ranges {
		stale.Ranges = append(stale.Ranges, partRange{Input: r.Input, Partition: r.Partition, Start: r.End, End: r.End + 7})
	}
	if data, err = encodeEntry(&stale); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, prefix+offsetsName(3), data); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()

	second := &scenario{job: jobName, inputs: inputs, storage: "file://" + dir, output: output, ledger: ledger, dedup: true,
		opts: Options{MaxBatchRecords: 1500, RunID: "ahead", hooks: hooks}}
	o := second.execute(t)
	o.check(t, "resumed over an offsets entry written ahead")
	if len(attempts[2]) != 2 || attempts[2][0] != attempts[2][1] {
		t.Fatalf("batch 2 attempts %v: want the crashed one and a re-run with the same positions", attempts[2])
	}
	if len(attempts[3]) != 1 || attempts[3][0] == fmt.Sprint(stale.Ranges) {
		t.Fatalf("batch 3 attempts %v: want one, planned anew, not the stale %v", attempts[3], stale.Ranges)
	}
}
