package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/dataflow/workerproc"
)

// A Fleet is a run's worker processes (--workers process), one per worker
// id, each joined to the coordinator over one wire connection. The
// execution owns them, as a cluster manager would: they may outlive a
// coordinator's crash, and a dead one is replaced by a fresh process. What
// the connections carry once a worker is ready is the executor's own.
//
// With WorkerCommand.External the processes are somebody else's (started
// by hand, or by a scheduler such as Kubernetes): the fleet waits for them
// to join, kills one by asking it to SIGKILL itself (wire's kill frame),
// and after a death waits for the replacement its scheduler starts.
type Fleet struct {
	l    *wire.Listener
	pool *workerproc.Pool // nil with External
	n    int
	// joinTimeout bounds a launch: FleetJoinTimeout, or
	// FleetExternalJoinTimeout when a scheduler starts the processes.
	joinTimeout time.Duration
	joined      int // incarnations that became ready (Started, with External)
	logf        func(format string, args ...any)

	mu    sync.Mutex
	slots map[int]*FleetSlot
	// lost counts the worker processes that died without a kill of the
	// run's (LostOnItsOwn).
	lost  int
	ended []ProcEnd
}

// ProcEnd is how one process of the run ended (Fleet.Ended).
type ProcEnd struct {
	ID, Pid int
	Signal  syscall.Signal // 0: exited by itself
	Err     error
}

// FleetSlot is one incarnation of a worker process and its connection.
type FleetSlot struct {
	ID   int
	Proc *workerproc.Process
	Conn *wire.Conn
	// Acquire is fork to ready.
	Acquire time.Duration
	// Peer is where this incarnation's peers reach it directly (its
	// wire.Mesh), "" when it listens for none.
	Peer string

	gone    chan struct{}
	mu      sync.Mutex
	brokeAt time.Time
	killed  time.Time
}

// Gone is closed once the slot's connection broke.
func (s *FleetSlot) Gone() <-chan struct{} { return s.gone }

// BrokenAt waits until the connection broke and says when it was seen.
func (s *FleetSlot) BrokenAt() time.Time {
	<-s.gone
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.brokeAt
}

// KilledAt is when the run SIGKILLed this incarnation (zero: it was not).
func (s *FleetSlot) KilledAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

// FleetConfig says which workers to start and what to welcome them with.
type FleetConfig struct {
	// Executor names the executor the workers serve (WorkerWelcome).
	Executor string
	// Config is the executor's configuration, sent whole in the Welcome.
	Config json.RawMessage
	// N workers, ids 0..N-1.
	N       int
	Command *WorkerCommand
	Alloc   memory.Allocator
	Log     func(format string, args ...any)
	// HeartbeatTimeout declares a silent worker dead (0: never).
	HeartbeatTimeout time.Duration
}

// FleetJoinTimeout bounds how long a started worker process may take to
// join and say it is ready.
const FleetJoinTimeout = 30 * time.Second

// FleetExternalJoinTimeout is the same bound for workers a scheduler
// starts: it includes pulling an image and the scheduler's restart
// back-off (Kubernetes waits 10 s before its first restart).
const FleetExternalJoinTimeout = 5 * time.Minute

// FleetCloseGrace is how long a worker process has to exit once its
// connection is closed at the end of a run, before it is killed.
const FleetCloseGrace = 2 * time.Second

// FleetMaxLost is how many worker processes may die on their own in one
// run before it fails: a worker that dies at every attempt (out of memory
// on the same task, say) would otherwise be replaced forever.
const FleetMaxLost = 10

// StartFleet listens for the run's workers, starts cfg.N of them and
// waits until each has joined and said it is ready.
func StartFleet(ctx context.Context, cfg FleetConfig) (*Fleet, error) {
	cmd := cfg.Command
	if cmd == nil || (!cmd.External && cmd.Args == nil) {
		return nil, errors.New("--workers process: this command cannot start worker processes")
	}
	token := cmd.Token
	if !cmd.External {
		var err error
		if token, err = wire.NewToken(); err != nil {
			return nil, err
		}
	} else if len(token) < MinTokenLen {
		return nil, fmt.Errorf("--worker-launch external: the run's token ($%s) must be at least %d characters", TokenEnv, MinTokenLen)
	}
	welcome, err := json.Marshal(WorkerWelcome{Executor: cfg.Executor, Config: cfg.Config})
	if err != nil {
		return nil, err
	}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	n := cfg.N
	f := &Fleet{n: n, slots: map[int]*FleetSlot{}, joinTimeout: FleetJoinTimeout, logf: logf}
	l, err := wire.Listen(cmd.Listen, wire.ListenConfig{Token: token, Conn: wire.Options{Alloc: cfg.Alloc, Log: logf, HeartbeatTimeout: cfg.HeartbeatTimeout},
		Welcome: func(h wire.Hello) (wire.Welcome, error) {
			id, err := strconv.Atoi(h.Worker)
			if err != nil || id < 0 || id >= n {
				return wire.Welcome{}, fmt.Errorf("no worker %q in this run (workers are 0..%d)", h.Worker, n-1)
			}
			if f.alive(id) { // two incarnations must never share a worker's work
				return wire.Welcome{}, fmt.Errorf("worker %d is in this run already (its connection is open)", id)
			}
			return wire.Welcome{Config: welcome}, nil
		}})
	if err != nil {
		return nil, err
	}
	f.l = l
	if cmd.External {
		f.joinTimeout = FleetExternalJoinTimeout
		logf("waiting for %d worker processes to join at %s: rewind worker --coordinator %s --id N (N in 0..%d), the run's token in $%s", n, l.Addr(), l.Addr(), n-1, TokenEnv)
	} else {
		f.pool, err = workerproc.NewPool(workerproc.Spec{Binary: cmd.Binary,
			Args: func(id int) []string { return cmd.Args(l.Addr(), id) },
			Env:  append(append([]string(nil), cmd.Env...), TokenEnv+"="+token), Log: logf})
		if err != nil {
			_ = l.Close()
			return nil, err
		}
	}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	if err := f.launch(ctx, ids...); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// alive says worker id's current incarnation is joined and its
// connection open.
func (f *Fleet) alive(id int) bool {
	f.mu.Lock()
	s := f.slots[id]
	f.mu.Unlock()
	return s != nil && s.Conn.Err() == nil
}

// launch starts a fresh process for each of ids (with External: waits for
// whoever starts them) and waits until all are ready.
func (f *Fleet) launch(ctx context.Context, ids ...int) error {
	procs := map[int]*workerproc.Process{}
	actx, cancel := context.WithTimeout(ctx, f.joinTimeout)
	defer cancel()
	began := time.Now()
	for _, id := range ids {
		if f.pool == nil {
			procs[id] = nil
			continue
		}
		proc, err := f.pool.Start(id)
		if err != nil {
			return err
		}
		procs[id] = proc
		go func() {
			select { // a worker that dies before it joins will never join
			case <-proc.Exited():
				cancel()
			case <-actx.Done():
			}
		}()
	}
	for len(procs) > 0 {
		c, hello, err := f.l.Accept(actx)
		if err != nil && actx.Err() != nil && ctx.Err() == nil {
			// A process that exits ends the wait (above), and one that
			// joined, said why it cannot start and exited at once may
			// have its connection waiting here still, with the reason.
			gctx, gcancel := context.WithTimeout(context.Background(), time.Second)
			c, hello, err = f.l.Accept(gctx)
			gcancel()
		}
		if err != nil {
			for id, proc := range procs {
				if proc == nil {
					continue
				}
				if e := proc.Err(); e != nil || exited(proc) {
					return fmt.Errorf("worker process %d exited before joining: %v", id, e)
				}
			}
			if f.pool == nil {
				return fmt.Errorf("waiting for worker processes %v to join at %s (--worker-launch external: whoever starts them did not within %s): %w", ids, f.l.Addr(), f.joinTimeout, err)
			}
			return fmt.Errorf("waiting for worker processes %v to join: %w", ids, err)
		}
		id, _ := strconv.Atoi(hello.Worker)
		proc, awaited := procs[id]
		if !awaited { // an incarnation this launch did not start
			_ = c.Close()
			continue
		}
		delete(procs, id)
		peer, err := awaitReady(actx, c, id)
		if err != nil {
			_ = c.Close()
			return err
		}
		// Acquire is fork to ready for a process started here; for one a
		// scheduler starts, from the launch (the death's detection) to
		// ready, the scheduler's restart included.
		acquire := time.Since(began)
		if proc != nil {
			acquire = f.pool.Joined(proc)
		}
		s := &FleetSlot{ID: id, Proc: proc, Conn: c, Acquire: acquire, Peer: peer, gone: make(chan struct{})}
		go func() {
			<-c.Done()
			s.mu.Lock()
			s.brokeAt = time.Now()
			s.mu.Unlock()
			close(s.gone)
		}()
		f.mu.Lock()
		f.slots[id] = s
		f.joined++
		f.mu.Unlock()
		f.logf("worker %d joined from %s, ready after %s", id, c.RemoteAddr(), acquire.Round(time.Microsecond))
	}
	return nil
}

// exited says proc has exited; nil (a process somebody else started) never
// is known to.
func exited(proc *workerproc.Process) bool {
	if proc == nil {
		return false
	}
	select {
	case <-proc.Exited():
		return true
	default:
		return false
	}
}

// Slot is worker id's current incarnation (nil: none).
func (f *Fleet) Slot(id int) *FleetSlot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.slots[id]
}

// Current is worker id's current process (tests signal it from outside);
// nil with External.
func (f *Fleet) Current(id int) *workerproc.Process {
	if f.pool == nil {
		return nil
	}
	return f.pool.Current(id)
}

// Started is how many processes the run started, replacements included
// (with External: how many joined).
func (f *Fleet) Started() int {
	if f.pool == nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.joined
	}
	return len(f.pool.All())
}

// Kill SIGKILLs worker id's process and waits until its connection is
// seen broken: it returns when it was killed and when it was declared
// dead. A worker killed already is one death, not two.
func (f *Fleet) Kill(id int) (killed, detected time.Time, err error) {
	s := f.Slot(id)
	if s == nil {
		return time.Time{}, time.Time{}, fmt.Errorf("no worker process %d", id)
	}
	if k := s.KilledAt(); !k.IsZero() {
		return k, s.BrokenAt(), nil
	}
	s.mu.Lock()
	s.killed = time.Now() // before the signal: its work must see a kill
	asked := s.killed
	s.mu.Unlock()
	if f.pool == nil {
		return asked, f.killExternal(s), nil
	}
	at, err := f.pool.Kill(id)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	s.mu.Lock()
	s.killed = at
	s.mu.Unlock()
	return at, s.BrokenAt(), nil
}

// killExternal asks the process of s, which somebody else started, to
// SIGKILL itself, and returns when its connection was seen broken. A
// process that cannot act on it (frozen) is fenced off instead: its
// connection is closed after FleetCloseGrace, so nothing it does later
// reaches the run.
func (f *Fleet) killExternal(s *FleetSlot) time.Time {
	_ = s.Conn.Kill()
	limit := time.NewTimer(FleetCloseGrace)
	defer limit.Stop()
	select {
	case <-s.gone:
	case <-limit.C:
		_ = s.Conn.Close()
	}
	return s.BrokenAt()
}

// Replace starts a fresh process for worker id once the old one has
// exited (with External: waits for the one its scheduler starts), and
// returns its acquire time.
func (f *Fleet) Replace(ctx context.Context, id int) (time.Duration, error) {
	if s := f.Slot(id); s != nil && f.pool == nil {
		select {
		case <-s.gone:
		default: // declared dead with its connection open (frozen)
			f.killExternal(s)
		}
	} else if s != nil {
		if !exited(s.Proc) {
			// Declared dead while its process lives on (frozen, or its
			// connection cut): make sure of it before its replacement
			// starts, so no two incarnations share its work.
			if _, err := f.pool.Kill(id); err != nil {
				return 0, err
			}
		}
		<-s.Proc.Exited()
	}
	if err := f.launch(ctx, id); err != nil {
		return 0, fmt.Errorf("replacing worker process %d: %w", id, err)
	}
	return f.Slot(id).Acquire, nil
}

// LostOnItsOwn counts a worker process that died (why) without a kill of
// the run's (killed is zero), and fails the run past FleetMaxLost.
func (f *Fleet) LostOnItsOwn(killed time.Time, why error) error {
	if !killed.IsZero() {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lost++
	if f.lost > FleetMaxLost {
		return fmt.Errorf("%d worker processes died on their own (the last: %v); giving up", f.lost, why)
	}
	return nil
}

// Close ends every worker process and stops listening: a worker whose
// connection closes exits, one that does not is killed. After it no
// process the run started is alive, and Ended says how each ended.
func (f *Fleet) Close() {
	f.mu.Lock()
	slots := f.slots
	f.mu.Unlock()
	for _, s := range slots {
		_ = s.Conn.Close()
	}
	_ = f.l.Close()
	if f.pool == nil { // the processes are their scheduler's: each exits as its connection closes
		return
	}
	limit := time.NewTimer(FleetCloseGrace)
	defer limit.Stop()
	for _, s := range slots {
		select {
		case <-s.Proc.Exited():
		case <-limit.C:
		}
	}
	_ = f.pool.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = f.ended[:0]
	for _, proc := range f.pool.All() {
		f.ended = append(f.ended, ProcEnd{ID: proc.ID, Pid: proc.Pid(), Signal: proc.Signaled(), Err: proc.Err()})
	}
}

// Ended is every process the run started, as it ended (after Close):
// what tests check kills and orphans with.
func (f *Fleet) Ended() []ProcEnd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ProcEnd(nil), f.ended...)
}

// readyMsg is a worker's first control message: ready once it has opened
// what it needs (acquire ends there), or failed with the reason. Its
// op field is the one every executor's control messages lead with.
type readyMsg struct {
	Op   string `json:"op"`
	Text string `json:"text,omitempty"`
	// Peer is the worker's mesh address (SendReadyAt).
	Peer string `json:"peer,omitempty"`
}

const (
	opReady  = "ready"
	opFailed = "failed"
)

// SendReady is a worker's first message when it could start.
func SendReady(c *wire.Conn) error { return sendReady(c, readyMsg{Op: opReady}) }

// SendReadyAt is SendReady for a worker whose peers reach it at peer
// (its wire.Mesh): the coordinator hands the address to the others.
func SendReadyAt(c *wire.Conn, peer string) error {
	return sendReady(c, readyMsg{Op: opReady, Peer: peer})
}

// SendFailed is a worker's first message when it could not start: the
// coordinator fails the run with why, rather than replace a worker that
// cannot start.
func SendFailed(c *wire.Conn, why error) error {
	return sendReady(c, readyMsg{Op: opFailed, Text: why.Error()})
}

func sendReady(c *wire.Conn, m readyMsg) error { return wire.SendJSON(c, m) }

// awaitReady waits for worker id's first message and returns its mesh
// address.
func awaitReady(ctx context.Context, c *wire.Conn, id int) (string, error) {
	b, err := c.Control(ctx)
	if err != nil && ctx.Err() != nil {
		// ctx ends when the process exits, and a worker that could not
		// start says why and exits: its words may still be on their way,
		// ahead of its connection's end, which Control returns after them.
		dctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b, err = c.Control(dctx)
		cancel()
	}
	if err != nil {
		return "", fmt.Errorf("worker process %d joined but never said it was ready: %w", id, err)
	}
	m, err := wire.DecodeJSON[readyMsg](b)
	switch {
	case err != nil:
		return "", fmt.Errorf("worker process %d's first message: %w", id, err)
	case m.Op == opFailed:
		return "", fmt.Errorf("worker process %d could not start: %s", id, m.Text)
	case m.Op != opReady:
		return "", fmt.Errorf("worker process %d: %q before it was ready", id, m.Op)
	}
	return m.Peer, nil
}

// ProcessInputs are the input specs for worker processes: a relative
// file: path made absolute (a worker runs in a fresh directory of its
// own), and a forgetful input refused, since its one reader cannot be
// shared across processes.
func ProcessInputs(specs map[string]string, sources map[string]source.Source) (map[string]string, error) {
	for name, src := range sources {
		if !src.Rereadable() {
			return nil, RefusedError{Err: fmt.Errorf("--workers process: input %s (%s) is forgetful, and a worker process cannot share its one reader; use --workers inproc", name, src.Spec())}
		}
	}
	out := make(map[string]string, len(specs))
	for name, spec := range specs {
		if path, ok := strings.CutPrefix(spec, "file:"); ok && !filepath.IsAbs(path) {
			abs, err := filepath.Abs(path)
			if err != nil {
				return nil, fmt.Errorf("input %s (%s): %w", name, spec, err)
			}
			spec = "file:" + abs
		}
		out[name] = spec
	}
	return out, nil
}
