package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/fault"
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
	var beat, join time.Duration
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
			// A worker a scheduler started asks to be killed this way (the
			// coordinator cannot signal a process on another machine): it
			// dies of SIGKILL at once, as if killed from outside.
			opts := wire.Options{HeartbeatInterval: beat, Log: logf}
			if killProcess != nil {
				opts.OnKill = func() { killProcess(fault.Spec{}) }
			}
			c, wel, err := run.JoinCoordinatorRetrying(cmd.Context(), addr, id, opts, join)
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
			if err := pw.ServeWorker(cmd.Context(), c, wel.Config, run.WorkerEnv{ID: id, Alloc: memory.NewGoAllocator(), Log: log}); err != nil {
				return err
			}
			// The run is over only if the coordinator said so; a broken
			// connection is its death, and a scheduler must start this
			// worker again (exit 1) to join the coordinator that resumes.
			if err := c.Err(); err != nil && !errors.Is(err, wire.ErrClosedByPeer) && !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("the connection to the coordinator broke before the run ended: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "coordinator", "", "the coordinator's `HOST:PORT`")
	cmd.Flags().IntVar(&id, "id", 0, "this worker's number")
	// The beat is how a coordinator with a heartbeat timeout tells a
	// frozen worker from a busy one; the coordinator passes its own.
	cmd.Flags().DurationVar(&beat, "heartbeat-interval", run.DefaultHeartbeatInterval, "beat this often on the connection")
	cmd.Flags().DurationVar(&join, "join-timeout", time.Minute, "keep dialing a coordinator that is not listening yet for this long (a scheduler may start workers first)")
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
// at cfg's interval, or (--worker-launch external) waits for the ones
// somebody else starts, at --listen.
func (f *runFlags) workerCommand(cfg run.Config) *run.WorkerCommand {
	interval, _ := cfg.Heartbeats()
	c := &run.WorkerCommand{Args: run.WorkerArgsBeating(interval), Listen: f.listen}
	if f.workerLaunch == launchExternal {
		c.External, c.Token = true, os.Getenv(run.TokenEnv)
	}
	return c
}

// The values of --worker-launch.
const (
	launchSelf     = "self"
	launchExternal = "external"
)

// addWorkerLaunchFlags registers how rewind run's worker processes are
// started and where they join. Only run has them: bench and trace start
// runs of their own, on this machine.
func addWorkerLaunchFlags(fl *pflag.FlagSet, f *runFlags) {
	fl.StringVar(&f.listen, "listen", "", "--workers process: the `HOST:PORT` the coordinator listens on for its workers (default: a free port on loopback)")
	fl.StringVar(&f.workerLaunch, "worker-launch", launchSelf, "--workers process: self (this process starts its worker processes), external (they are started by hand or by a scheduler and join at --listen, with the token in $"+run.TokenEnv+"; see docs/deploy.md)")
}

// launchSettings validates --listen and --worker-launch against --workers
// (m): both mean something only for worker processes, so with inproc they
// are refused rather than ignored.
func (f *runFlags) launchSettings(fl *pflag.FlagSet, m run.WorkerMode) error {
	if f.workerLaunch != launchSelf && f.workerLaunch != launchExternal {
		return usagef("invalid --worker-launch %q: allowed are self, external", f.workerLaunch)
	}
	if m != run.WorkersProcess {
		for _, name := range []string{"listen", "worker-launch"} {
			if fl.Changed(name) {
				return usagef("invalid --%s: it only applies to worker processes; give --workers process", name)
			}
		}
		return nil
	}
	if f.listen != "" {
		if _, _, err := net.SplitHostPort(f.listen); err != nil {
			return usagef("invalid --listen %q: want HOST:PORT (%v)", f.listen, err)
		}
	}
	if f.workerLaunch != launchExternal {
		return nil
	}
	if _, port, _ := net.SplitHostPort(f.listen); port == "" || port == "0" {
		return usagef("invalid --worker-launch external: give --listen HOST:PORT with a fixed port, the address its workers are told to dial")
	}
	if len(os.Getenv(run.TokenEnv)) < run.MinTokenLen {
		return usagef("invalid --worker-launch external: put the run's token in $%s (at least %d characters, e.g. openssl rand -hex 32) and give every worker the same", run.TokenEnv, run.MinTokenLen)
	}
	return nil
}

// parseWorkerModes is a bench subcommand's --workers: inproc, process,
// or both comma-separated, each measured side by side in one run.
func parseWorkerModes(list string) ([]run.WorkerMode, error) {
	var out []run.WorkerMode
	for _, s := range strings.Split(list, ",") {
		m, err := run.ParseWorkerMode(strings.TrimSpace(s))
		if err != nil {
			return nil, usagef("invalid --workers %q: comma-separated, from inproc, process", list)
		}
		if slices.Contains(out, m) {
			return nil, usagef("invalid --workers %q: %s twice", list, m)
		}
		out = append(out, m)
	}
	return out, nil
}
