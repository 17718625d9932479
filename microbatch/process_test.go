package microbatch

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
)

// testWorkerEnv makes this test binary serve as a microbatch worker
// process (TestMain).
const testWorkerEnv = "REWIND_MICROBATCH_TEST_WORKER"

func testWorkerCommand() *run.WorkerCommand { return runtest.WorkerCommand(testWorkerEnv) }

// preparedEnv is a prepared run of sc, closed (and its allocator checked)
// when the test ends.
func preparedEnv(t *testing.T, sc *scenario) (*run.Env, *options) {
	t.Helper()
	cfg := sc.config(t)
	env := runtest.PrepareWithWorkers(t, cfg, testWorkerEnv)
	opts, err := Options{}.resolve(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env, opts
}

// TestWorkerProcessesStartFromTheirWelcomeAlone: each worker process of a
// microbatch run joins, opens the inputs and storage its Welcome names,
// finds the coordinator's partitions and owners, and says ready; a request
// it does not know is answered with an error naming it; a kill and a
// replacement are measured; none outlives the fleet.
func TestWorkerProcessesStartFromTheirWelcomeAlone(t *testing.T) {
	for _, jobName := range []string{"keyed-count", "join"} {
		t.Run(jobName, func(t *testing.T) {
			env, opts := preparedEnv(t, &scenario{job: jobName, inputs: defaultInputs(jobName, 2000, 1), parallelism: 2})
			f, err := startWorkerProcesses(context.Background(), env, opts, "r1")
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					f.Close()
				}
			}()
			for id := range 2 {
				s := f.Slot(id)
				if s == nil || s.Acquire <= 0 {
					t.Fatalf("worker %d: not ready, or its acquire unmeasured", id)
				}
				if err := s.Conn.SendControl([]byte(`{"op":"run","id":1}`)); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				b, err := s.Conn.Control(ctx)
				cancel()
				var m procMsg
				if err != nil || json.Unmarshal(b, &m) != nil || m.Op != opAnswer || m.ID != 1 || !strings.Contains(m.Text, `unknown request "run"`) {
					t.Fatalf("worker %d answered an unknown request with %s (%v), want a refusal", id, b, err)
				}
			}
			runtest.KillReplaceAndClose(t, f, 1)
			closed = true
		})
	}
}

// TestWorkerProcessWithOtherPartitionsRefusesToStart: a worker whose
// inputs split otherwise than its coordinator's says why, and the start
// fails with it, rather than read other offsets than the planned ones.
func TestWorkerProcessWithOtherPartitionsRefusesToStart(t *testing.T) {
	env, opts := preparedEnv(t, &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", 200, 1), parallelism: 2})
	topo, err := newTopology(env.Job, env.Sources, opts.parallelism)
	if err != nil {
		t.Fatal(err)
	}
	names := partitionNames(topo)
	wr, err := run.NewWorkerRun(env, env.Config.Inputs, "r1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(procConfig{WorkerRun: wr, Parallelism: 2, Partitions: names[:len(names)-1]})
	if err != nil {
		t.Fatal(err)
	}
	f, err := run.StartFleet(context.Background(), run.FleetConfig{Executor: "microbatch", Config: cfg, N: 2, Command: testWorkerCommand(), Alloc: env.Alloc})
	if err == nil {
		f.Close()
		t.Fatal("a worker with other partitions than its coordinator's started")
	}
	if !strings.Contains(err.Error(), "could not start") || !strings.Contains(err.Error(), "the inputs split into") {
		t.Fatalf("error %q does not say the partitions differ", err)
	}
	if kids := runtest.ChildrenOf(os.Getpid()); len(kids) != 0 {
		time.Sleep(time.Second) // the other worker is being closed
		if kids = runtest.ChildrenOf(os.Getpid()); len(kids) != 0 {
			t.Fatalf("processes left after a failed start: %v", kids)
		}
	}
}

// TestReplacementWorkerProcessRestoresTheCommittedState: after a run, the
// worker processes of a fresh fleet rebuild their operators from the last
// committed state version in durable storage, each its own key groups,
// and hold exactly the rows storage has for those groups; a SIGKILLed
// worker's replacement does the same from storage alone.
func TestReplacementWorkerProcessRestoresTheCommittedState(t *testing.T) {
	ctx := context.Background()
	store := "file://" + fastDir(t)
	sc := &scenario{job: "keyed-count", inputs: defaultInputs("keyed-count", 3000, 1), parallelism: 2, storage: store,
		opts: Options{RunID: "restore1"}}
	if o := sc.execute(t); o.err != nil {
		t.Fatal(o.err)
	}
	env, opts := preparedEnv(t, &scenario{job: "keyed-count", inputs: sc.inputs, parallelism: 2, storage: store})
	c, err := newCoordinator(env, opts, "restore1", 0, newMetrics(nil, RecoveryRerunBatch, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close(false)
	l, err := c.list(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := PlanRestart(l)
	if err != nil || rp.LastCommitted < 0 {
		t.Fatalf("no committed batch to restore (%v)", err)
	}
	ce, err := c.readCommit(ctx, rp.LastCommitted)
	if err != nil {
		t.Fatal(err)
	}
	oe, err := c.readOffsets(ctx, rp.LastCommitted)
	if err != nil {
		t.Fatal(err)
	}
	idx, _, _, err := c.readManifest(ctx, ce.StateVersion)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := loadState(ctx, c.store, c.prefix, idx, func(string, int) bool { return true }, env.Alloc)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 2)
	for _, a := range ls {
		for kg, g := range a {
			if g.Batch != nil {
				want[keygroup.Owner(kg, 2)] += g.Batch.NumRows()
			}
		}
	}
	ls.release()
	if want[0] == 0 || want[1] == 0 {
		t.Fatalf("state version %d holds %v rows per worker: nothing to restore", ce.StateVersion, want)
	}

	f, err := startWorkerProcesses(ctx, env, opts, "restore1")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
	}()
	restore := func(id int) {
		t.Helper()
		s := f.Slot(id)
		if err := sendMsg(s.Conn, procMsg{Op: opReset, ID: 1, Version: ce.StateVersion, Index: idx, Watermark: oe.Watermark}); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		b, err := s.Conn.Control(rctx)
		if err != nil {
			t.Fatalf("worker %d: %v", id, err)
		}
		var m procMsg
		if err := json.Unmarshal(b, &m); err != nil || m.Op != opAnswer || m.Text != "" {
			t.Fatalf("worker %d answered the restore with %s", id, b)
		}
		var got int64
		for _, n := range m.Rows {
			got += n
		}
		if got != want[id] {
			t.Fatalf("worker %d (pid %d) restored %d rows of state (%v), storage holds %d for its key groups", id, s.Proc.Pid(), got, m.Rows, want[id])
		}
	}
	restore(0)
	restore(1)
	if _, _, err := f.Kill(1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Replace(ctx, 1); err != nil {
		t.Fatal(err)
	}
	restore(1)
	restore(0) // again, over the operators it holds
	f.Close()
	closed = true
	if kills := runtest.CheckNoOrphans(t, f.Ended()); kills != 1 {
		t.Fatalf("%d processes SIGKILLed, want 1", kills)
	}
}
