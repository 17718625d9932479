package runtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// A package's tests re-execute their own binary as its worker processes:
// TestMain calls WorkerMain when the environment variable the package
// chose is set, and the tests start the workers with WorkerCommand.

// WorkerCommand starts this test binary as a worker process, as `rewind
// worker` would run: it joins the coordinator at addr as worker id, with
// the token in the environment, and env=1 set.
func WorkerCommand(env string) *run.WorkerCommand {
	return &run.WorkerCommand{Binary: os.Args[0], Env: []string{env + "=1"},
		Args: func(addr string, id int) []string { return []string{addr, strconv.Itoa(id)} }}
}

// WorkerMain is such a worker process's main: it joins the coordinator
// and serves it with pw until the connection closes, and returns the exit
// code. Its allocator is checked: a worker that ends with Arrow memory
// outstanding exits 3, which the run's fleet keeps (run.Fleet.Ended) and
// CheckNoOrphans refuses.
func WorkerMain(pw run.ProcessWorker) int {
	if len(os.Args) < 3 {
		return 2
	}
	id, err := strconv.Atoi(os.Args[2])
	if err != nil {
		return 2
	}
	ctx := context.Background()
	// Batches received on the data channels are allocated here too.
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	c, wel, err := run.JoinCoordinator(ctx, os.Args[1], id, wire.Options{Alloc: alloc, HeartbeatInterval: 100 * time.Millisecond, Log: func(string, ...any) {}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	err = pw.ServeWorker(ctx, c, wel.Config, run.WorkerEnv{ID: id, Alloc: alloc, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
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

// PrepareWithWorkers prepares a run of cfg on a checked allocator, with
// the test binary as its worker command (WorkerCommand(env)); the run is
// closed, and its allocator checked to be at zero, when the test ends.
func PrepareWithWorkers(t testing.TB, cfg run.Config, env string) *run.Env {
	t.Helper()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	e, err := run.Prepare(context.Background(), cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("closing env: %v", err)
		}
		alloc.AssertSize(t, 0)
	})
	e.WorkerCommand = WorkerCommand(env)
	return e
}
