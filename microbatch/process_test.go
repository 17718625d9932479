package microbatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// testWorkerEnv makes this test binary serve as a microbatch worker
// process (TestMain).
const testWorkerEnv = "REWIND_MICROBATCH_TEST_WORKER"

func testWorkerCommand() *run.WorkerCommand {
	return &run.WorkerCommand{Binary: os.Args[0], Env: []string{testWorkerEnv + "=1"},
		Args: func(addr string, id int) []string { return []string{addr, strconv.Itoa(id)} }}
}

// serveTestWorker is the worker process's main; its allocator is checked
// (a leak exits 3, which the fleet's Ended shows as an error).
func serveTestWorker() int {
	id, err := strconv.Atoi(os.Args[2])
	if err != nil {
		return 2
	}
	ctx := context.Background()
	c, wel, err := run.JoinCoordinator(ctx, os.Args[1], id, wire.Options{HeartbeatInterval: 100 * time.Millisecond, Log: func(string, ...any) {}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	err = Executor{}.ServeWorker(ctx, c, wel.Config, run.WorkerEnv{ID: id, Alloc: alloc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_ = c.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if left := alloc.CurrentAlloc(); left != 0 {
		fmt.Fprintf(os.Stderr, "worker %d: %d bytes of Arrow memory outstanding at exit\n", id, left)
		return 3
	}
	return 0
}

// preparedEnv is a prepared run of sc, closed (and its allocator checked)
// when the test ends.
func preparedEnv(t *testing.T, sc *scenario) (*run.Env, *options) {
	t.Helper()
	cfg := sc.config(t)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(context.Background(), cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Close(); err != nil {
			t.Errorf("closing env: %v", err)
		}
		alloc.AssertSize(t, 0)
	})
	env.WorkerCommand = testWorkerCommand()
	opts, err := Options{}.resolve(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env, opts
}

// TestWorkerProcessesStartFromTheirWelcomeAlone: each worker process of a
// microbatch run joins, opens the inputs and storage its Welcome names,
// finds the coordinator's partitions and owners, and says ready; asked for
// a batch task it says it does not run one yet (the reason the trait is
// unset); a kill and a replacement are measured; none outlives the fleet.
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
				if err := s.Conn.SendControl([]byte(`{"op":"run"}`)); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				b, err := s.Conn.Control(ctx)
				cancel()
				var m map[string]string
				if err != nil || json.Unmarshal(b, &m) != nil || m["op"] != "error" || !strings.Contains(m["text"], "do not run batch tasks yet") {
					t.Fatalf("worker %d answered a batch task with %s (%v), want a refusal", id, b, err)
				}
			}
			if _, _, err := f.Kill(1); err != nil {
				t.Fatal(err)
			}
			if acq, err := f.Replace(context.Background(), 1); err != nil || acq <= 0 {
				t.Fatalf("replacement: acquire %v, %v", acq, err)
			}
			f.Close()
			closed = true
			if kills := runtest.CheckNoOrphans(t, f.Ended()); kills != 1 || len(f.Ended()) != 3 {
				t.Fatalf("%d of %d processes SIGKILLed, want 1 of 3", kills, len(f.Ended()))
			}
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
	cfg, err := json.Marshal(procConfig{Job: env.Config.Job, Params: env.Config.Params, Inputs: env.Config.Inputs, Seed: env.Config.Seed,
		Storage: env.Store.URL(), RunID: "r1", Parallelism: 2, Partitions: names[:len(names)-1]})
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
