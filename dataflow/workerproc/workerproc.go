// Package workerproc starts, watches, kills and replaces worker
// processes: real OS processes of the same binary, each in a fresh
// working directory, so a worker's death takes its memory and its files
// with it.
//
// A Pool knows processes, not protocols: what a worker does once started
// is between it and the coordinator (package wire). The Pool measures the
// two parts of a recovery bill only it can see: when a process was killed,
// and how long a new one took from fork to "joined" (the acquire part),
// which the coordinator reports with Joined.
package workerproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec says how to start a worker.
type Spec struct {
	// Binary is the executable; os.Executable() when empty.
	Binary string
	// Args are the arguments of worker id.
	Args func(id int) []string
	// Env is added to the coordinator's environment (a run token goes
	// here, not in Args, where any user's ps would show it).
	Env []string
	// Root holds every worker's working directory; each incarnation gets
	// a fresh one, removed when it exits.
	Root string
	// Log receives one line per start, exit and kill; discarded when nil.
	Log func(format string, args ...any)
}

// Process is one incarnation of a worker.
type Process struct {
	ID          int
	Incarnation int
	Dir         string
	Started     time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the exit status, once exited
	killed time.Time
	joined time.Time
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Pool is the coordinator's set of worker processes.
type Pool struct {
	spec Spec

	mu      sync.Mutex
	current map[int]*Process
	all     []*Process
	closed  bool
}

// NewPool returns a pool that starts workers by spec.
func NewPool(spec Spec) (*Pool, error) {
	if spec.Args == nil {
		return nil, errors.New("workerproc: Spec.Args is required")
	}
	if spec.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this binary to start workers: %w", err)
		}
		spec.Binary = exe
	}
	if spec.Root == "" {
		dir, err := os.MkdirTemp("", "rewind-workers-")
		if err != nil {
			return nil, err
		}
		spec.Root = dir
	}
	if spec.Log == nil {
		spec.Log = func(string, ...any) {}
	}
	return &Pool{spec: spec, current: map[int]*Process{}}, nil
}

// Start starts worker id's next incarnation. A previous one must have
// exited (Kill it first): two live incarnations of one worker would both
// believe they own its work.
func (p *Pool) Start(id int) (*Process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("workerproc: pool is closed")
	}
	inc := 0
	if prev := p.current[id]; prev != nil {
		select {
		case <-prev.exited:
		default:
			return nil, fmt.Errorf("workerproc: worker %d (pid %d) is still running", id, prev.Pid())
		}
		inc = prev.Incarnation + 1
	}
	dir := filepath.Join(p.spec.Root, fmt.Sprintf("worker-%d-%d", id, inc))
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making worker %d's directory: %w", id, err)
	}
	cmd := exec.Command(p.spec.Binary, p.spec.Args(id)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.Stdout = os.Stderr // a worker's output is diagnostics, never the run's result
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = childAttr()
	proc := &Process{ID: id, Incarnation: inc, Dir: dir, cmd: cmd, exited: make(chan struct{})}
	proc.Started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting worker %d: %w", id, err)
	}
	p.current[id] = proc
	p.all = append(p.all, proc)
	p.spec.Log("worker %d (incarnation %d) started: pid %d", id, inc, cmd.Process.Pid)
	go func() {
		proc.err = cmd.Wait()
		// The working directory goes with the process: no worker-local
		// file survives into a replacement.
		_ = os.RemoveAll(dir)
		p.spec.Log("worker %d (pid %d) exited: %v", id, cmd.Process.Pid, exitText(proc.err))
		close(proc.exited)
	}()
	return proc, nil
}

// All are every process the pool started, in start order.
func (p *Pool) All() []*Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Process(nil), p.all...)
}

// Current is worker id's latest incarnation, or nil.
func (p *Pool) Current(id int) *Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current[id]
}

// Kill SIGKILLs worker id's current process and returns when it was sent;
// it does not wait for the exit (Exited does).
func (p *Pool) Kill(id int) (time.Time, error) {
	p.mu.Lock()
	proc := p.current[id]
	p.mu.Unlock()
	if proc == nil {
		return time.Time{}, fmt.Errorf("workerproc: no worker %d", id)
	}
	at := time.Now()
	if err := proc.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return time.Time{}, fmt.Errorf("killing worker %d (pid %d): %w", id, proc.Pid(), err)
	}
	p.mu.Lock()
	proc.killed = at
	p.mu.Unlock()
	p.spec.Log("worker %d (pid %d) sent SIGKILL", id, proc.Pid())
	return at, nil
}

// Joined records that proc's worker has joined the coordinator and
// returns the acquire time: from the fork to now.
func (p *Pool) Joined(proc *Process) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if proc.joined.IsZero() {
		proc.joined = time.Now()
	}
	return proc.joined.Sub(proc.Started)
}

// KilledAt is when proc was sent SIGKILL by Kill (zero if it was not:
// it died on its own).
func (p *Pool) KilledAt(proc *Process) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return proc.killed
}

// Close kills every process still running, waits for them and removes
// the pool's directory. After Close no process the pool started is alive.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	all := append([]*Process(nil), p.all...)
	p.mu.Unlock()
	for _, proc := range all {
		select {
		case <-proc.exited:
			continue
		default:
		}
		_ = proc.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, proc := range all {
		<-proc.exited
	}
	return os.RemoveAll(p.spec.Root)
}

// Signaled is the signal that ended proc, once it has exited (0: it
// exited by itself).
func (p *Process) Signaled() syscall.Signal {
	var ee *exec.ExitError
	if errors.As(p.Err(), &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ws.Signal()
		}
	}
	return 0
}

// Err is proc's exit status once it has exited.
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by " + unix.SignalName(ws.Signal())
		}
	}
	return err.Error()
}
