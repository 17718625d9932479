package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// WorkerMode is where an executor's workers run (--workers).
type WorkerMode string

const (
	// WorkersInproc: every worker is simulated inside this process; a
	// killed worker's goroutines and memory are dropped (the default).
	WorkersInproc WorkerMode = "inproc"
	// WorkersProcess: every worker is a process of this binary (`rewind
	// worker`), and a kill is a SIGKILL (issue #17).
	WorkersProcess WorkerMode = "process"
)

// ParseWorkerMode reads a --workers value; "" is inproc.
func ParseWorkerMode(s string) (WorkerMode, error) {
	switch WorkerMode(s) {
	case "", WorkersInproc:
		return WorkersInproc, nil
	case WorkersProcess:
		return WorkersProcess, nil
	}
	return "", fmt.Errorf("invalid --workers %q: allowed are inproc, process", s)
}

// The heartbeat defaults of --workers process: a worker beats every
// 100 ms, and one silent for 5 s (frozen: its connection never breaks) is
// declared dead. A broken connection is detected at once either way.
const (
	DefaultHeartbeatInterval = 100 * time.Millisecond
	DefaultHeartbeatTimeout  = 5 * time.Second
)

// Heartbeats are the configured heartbeat interval and timeout, or the
// defaults where unset.
func (c Config) Heartbeats() (interval, timeout time.Duration) {
	interval, timeout = c.HeartbeatInterval, c.HeartbeatTimeout
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	if timeout <= 0 {
		timeout = DefaultHeartbeatTimeout
	}
	return interval, timeout
}

// TokenEnv is the environment variable a worker process finds the run's
// token in: never an argument, which any user's ps shows.
const TokenEnv = "REWIND_WORKER_TOKEN"

// WorkerCommand says how to start a worker process of this run; the
// executor that starts workers adds TokenEnv to Env.
type WorkerCommand struct {
	// Binary is the executable; os.Executable() when empty.
	Binary string
	// Args are worker id's arguments, to join the coordinator at addr.
	Args func(addr string, id int) []string
	// Env is added to the coordinator's environment.
	Env []string
	// Listen is where the coordinator listens for its workers (--listen);
	// "" is a free port on loopback.
	Listen string
	// External says nobody here starts the workers (--worker-launch
	// external): they are started by hand or by a scheduler, with Token
	// in TokenEnv, and join at Listen; after a death the run waits for the
	// replacement the scheduler starts. Binary and Args are then unused.
	External bool
	// Token is the run's token with External (the workers are given the
	// same one by whoever starts them); otherwise each run makes its own.
	Token string
}

// MinTokenLen is the shortest token a run accepts from outside: a
// worker's only credential must not be guessable.
const MinTokenLen = 32

// WorkerArgs are the arguments of `rewind worker`: the address and the
// id, nothing else (the token is in the environment, the configuration in
// the coordinator's Welcome).
func WorkerArgs(addr string, id int) []string {
	return []string{"worker", "--coordinator", addr, "--id", strconv.Itoa(id)}
}

// WorkerArgsBeating are WorkerArgs for workers that beat every interval
// instead of DefaultHeartbeatInterval. The beat is an argument, not part
// of the Welcome, because a worker beats from its first frame on.
func WorkerArgsBeating(interval time.Duration) func(addr string, id int) []string {
	if interval <= 0 || interval == DefaultHeartbeatInterval {
		return WorkerArgs
	}
	return func(addr string, id int) []string {
		return append(WorkerArgs(addr, id), "--heartbeat-interval", interval.String())
	}
}

// WorkerWelcome is what the coordinator's Welcome carries: which
// executor the worker serves and that executor's own configuration.
type WorkerWelcome struct {
	Executor string          `json:"executor"`
	Config   json.RawMessage `json:"config"`
}

// ProcessWorker is an executor that can run as a worker process
// (Traits.ProcessWorkers): ServeWorker does what its coordinator asks over
// c until the connection closes.
type ProcessWorker interface {
	ServeWorker(ctx context.Context, c *wire.Conn, config json.RawMessage, w WorkerEnv) error
}

// WorkerEnv is what a worker process has besides its configuration.
type WorkerEnv struct {
	ID    int
	Alloc memory.Allocator
	Log   *slog.Logger
}

// JoinCoordinator dials the coordinator at addr as worker id with the
// token from TokenEnv and returns the connection and the Welcome.
func JoinCoordinator(ctx context.Context, addr string, id int, opts wire.Options) (*wire.Conn, WorkerWelcome, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, WorkerWelcome{}, fmt.Errorf("no run token: a worker finds it in $%s, which the coordinator sets for the workers it starts", TokenEnv)
	}
	c, wel, err := wire.Dial(ctx, addr, wire.Hello{Token: token, Worker: strconv.Itoa(id)}, opts)
	if err != nil {
		return nil, WorkerWelcome{}, err
	}
	var ww WorkerWelcome
	if err := json.Unmarshal(wel.Config, &ww); err != nil {
		_ = c.Close()
		return nil, WorkerWelcome{}, fmt.Errorf("the coordinator's welcome is not a worker configuration: %w", err)
	}
	return c, ww, nil
}

// JoinCoordinatorRetrying is JoinCoordinator dialing again while nothing
// listens at addr yet (a scheduler may start a worker before its
// coordinator), for up to limit; a refusal (a wrong token, a worker id
// already in the run) is final.
func JoinCoordinatorRetrying(ctx context.Context, addr string, id int, opts wire.Options, limit time.Duration) (*wire.Conn, WorkerWelcome, error) {
	deadline := time.Now().Add(limit)
	wait := 50 * time.Millisecond
	for {
		c, wel, err := JoinCoordinator(ctx, addr, id, opts)
		var op *net.OpError
		if err == nil || !errors.As(err, &op) || op.Op != "dial" || time.Now().Add(wait).After(deadline) {
			return c, wel, err
		}
		select {
		case <-ctx.Done():
			return nil, WorkerWelcome{}, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// SeriesReader is the run's record of a reader of input name's partition
// opened at offset, for an executor whose reads happen in a worker
// process: it reports them here as they happen, so the run over time sees
// them as it sees a local reader's. Nil (which records nothing) outside
// Execute.
func (e *Env) SeriesReader(name string, partition int, offset int64) *report.SeriesReader {
	first, ok := e.seriesFirst[name]
	if !ok {
		return nil
	}
	return e.Series.Open(first+partition, offset)
}
