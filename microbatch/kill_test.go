package microbatch

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// TestBatchStopsWhenAKillHasOnlyClosedStop replays, without timing, the
// interleaving behind TestRandomCrashSchedules seed 181: a worker kill
// (after N records read, from a reader goroutine) closes the worker's stop
// channel, and its goroutine is preempted before the kill is complete.
// Meanwhile the batch's source stage, waiting for input, sees stop closed
// and gives up on the partition. The batch must end as lost. It used to
// read the death from a flag set after the close, see every worker alive,
// and go on without that input: the batch was sealed and committed with
// part of its rows, and the windows they belonged to came out short or
// not at all.
func TestBatchStopsWhenAKillHasOnlyClosedStop(t *testing.T) {
	ctx := t.Context()
	sc := &scenario{job: "windowed-sum", inputs: defaultInputs("windowed-sum", 400, 1), parallelism: 1}
	cfg := sc.config(t)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	env, err := run.Prepare(ctx, cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer func() {
		if err := env.Close(); err != nil {
			t.Errorf("closing env: %v", err)
		}
	}()
	opts, err := Options{}.resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newCoordinator(env, opts, "kill-test", 0, newMetrics(nil, RecoveryRerunBatch, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	c.ends = make([]int64, len(c.topo.parts))
	c.wm, c.stateVersion = operator.NoWatermark, -1
	// The worker's readers are never started, so the batch's input never
	// arrives: the source stage waits until the worker stops.
	w, err := c.newWorker(ctx, 0, loadedState{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.teardown()
	c.workers = []*worker{w}
	c.cur = &offsetsEntry{Batch: 0, Job: env.Job.Name, WatermarkBefore: operator.NoWatermark, Watermark: operator.NoWatermark}
	for _, p := range c.topo.parts {
		c.cur.Ranges = append(c.cur.Ranges, partRange{Input: p.input, Partition: p.name, Start: 0, End: 10})
	}

	// What a kill does first; this one gets no further for now.
	w.once.Do(func() { close(w.stop) })

	ev, err := c.runBatch(ctx, false)
	if _, lost := ev.(WorkerLost); !lost || err != nil {
		t.Fatalf("runBatch = %T%+v, %v; want WorkerLost: the worker stopped before its source stage took any of the batch's %d rows",
			ev, ev, err, c.cur.rows())
	}
}
