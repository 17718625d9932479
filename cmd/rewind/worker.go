package main

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// newWorkerCmd is `rewind worker`, the worker process a coordinator
// started with --workers process starts. It is hidden: a user starts
// workers with rewind run, or by hand with the address and the run's token
// (in $REWIND_WORKER_TOKEN); everything else comes from the coordinator.
func newWorkerCmd(stderr io.Writer) *cobra.Command {
	var addr string
	var id int
	var beat time.Duration
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
			if beat <= 0 {
				return usagef("invalid --heartbeat-interval %s: must be positive", beat)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("worker", id)
			// The connection's own lines (its close at the end of a run
			// among them) are details; the worker's errors are warnings.
			logf := func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
			c, wel, err := run.JoinCoordinator(cmd.Context(), addr, id, wire.Options{HeartbeatInterval: beat, Log: logf})
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
	// The beat is how a coordinator with a heartbeat timeout tells a
	// frozen worker from a busy one; the coordinator passes its own.
	cmd.Flags().DurationVar(&beat, "heartbeat-interval", run.DefaultHeartbeatInterval, "beat this often on the connection")
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

// addWorkerFlags registers --workers and the heartbeat flags (run, bench
// and trace share them).
func addWorkerFlags(fl *pflag.FlagSet, f *runFlags) {
	fl.StringVar(&f.workers, "workers", string(run.WorkersInproc), "where workers run: inproc (simulated in this process), process (each a process of this binary; a kill is a SIGKILL)")
	fl.DurationVar(&f.heartbeatInterval, "heartbeat-interval", run.DefaultHeartbeatInterval, "--workers process: how often a worker process beats")
	fl.DurationVar(&f.heartbeatTimeout, "heartbeat-timeout", run.DefaultHeartbeatTimeout, "--workers process: a worker process silent this long (frozen) is declared dead; a broken connection is detected at once")
}

// workerSettings validates --workers and the heartbeat flags into cfg,
// whatever the executor: the heartbeat flags only mean something for
// worker processes, so with inproc they are refused rather than ignored.
func (f *runFlags) workerSettings(fl *pflag.FlagSet, cfg *run.Config) error {
	m, err := run.ParseWorkerMode(f.workers)
	if err != nil {
		return usageError{err}
	}
	if m == run.WorkersInproc {
		for _, name := range []string{"heartbeat-interval", "heartbeat-timeout"} {
			if fl.Changed(name) {
				return usagef("invalid --%s: it does nothing with --workers inproc, where workers are simulated in this process and a kill is seen at once (the modelled delay is --detect-delay); give --workers process", name)
			}
		}
	}
	switch {
	case f.heartbeatInterval <= 0:
		return usagef("invalid --heartbeat-interval %s: must be positive", f.heartbeatInterval)
	case f.heartbeatTimeout <= f.heartbeatInterval:
		return usagef("invalid --heartbeat-timeout %s: must be longer than --heartbeat-interval %s, or every worker is declared dead between two beats", f.heartbeatTimeout, f.heartbeatInterval)
	}
	cfg.Workers, cfg.HeartbeatInterval, cfg.HeartbeatTimeout = m, f.heartbeatInterval, f.heartbeatTimeout
	return nil
}

// workerCommand starts `rewind worker` processes of this binary beating
// at cfg's interval.
func workerCommand(cfg run.Config) *run.WorkerCommand {
	interval, _ := cfg.Heartbeats()
	return &run.WorkerCommand{Args: run.WorkerArgsBeating(interval)}
}
