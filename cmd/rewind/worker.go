package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// workerHeartbeat is how often a worker process beats on its connection,
// so a coordinator with a heartbeat timeout can tell a frozen worker from
// a busy one.
const workerHeartbeat = 100 * time.Millisecond

// newWorkerCmd is `rewind worker`, the worker process a coordinator
// started with --workers process starts. It is hidden: a user starts
// workers with rewind run, or by hand with the address and the run's token
// (in $REWIND_WORKER_TOKEN); everything else comes from the coordinator.
func newWorkerCmd(stderr io.Writer) *cobra.Command {
	var addr string
	var id int
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Serve as a worker process of a run (started by rewind run --workers process)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if addr == "" {
				return usagef("invalid --coordinator: give the coordinator's HOST:PORT")
			}
			if id < 0 {
				return usagef("invalid --id %d: must not be negative", id)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", id)
			// The connection's own lines (its close at the end of a run
			// among them) are details; the worker's errors are warnings.
			logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
			c, wel, err := run.JoinCoordinator(cmd.Context(), addr, id, wire.Options{HeartbeatInterval: workerHeartbeat, Log: logf})
			if err != nil {
				return err
			}
			defer c.Close()
			exec, ok := executors[wel.Executor]
			if !ok {
				return fmt.Errorf("the coordinator asks for executor %q, which this binary does not have", wel.Executor)
			}
			pw, ok := exec.(run.ProcessWorker)
			if !ok || !exec.Traits().ProcessWorkers {
				return fmt.Errorf("executor %s does not run as a worker process", exec.Name())
			}
			return pw.ServeWorker(cmd.Context(), c, wel.Config, run.WorkerEnv{ID: id, Alloc: memory.NewGoAllocator(), Log: log})
		},
	}
	cmd.Flags().StringVar(&addr, "coordinator", "", "the coordinator's `HOST:PORT`")
	cmd.Flags().IntVar(&id, "id", 0, "this worker's number")
	return cmd
}

// workerMode is --workers, refused (a usage error) for an executor whose
// workers cannot be processes.
func (f *runFlags) workerMode(exec run.Executor) (run.WorkerMode, error) {
	m, err := run.ParseWorkerMode(f.workers)
	if err != nil {
		return m, usageError{err}
	}
	if m == run.WorkersProcess && !exec.Traits().ProcessWorkers {
		return m, usagef("invalid --workers process: executor %s runs its workers inside this process only; use --workers inproc", exec.Name())
	}
	return m, nil
}
