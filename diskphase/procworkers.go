package diskphase

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

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/dataflow/workerproc"
)

// joinTimeout bounds how long a started worker process may take to join.
const joinTimeout = 30 * time.Second

// procWorkers are a run's worker processes (--workers process), one per
// worker slot of the machine. The execution owns them, as a cluster
// manager would: they outlive a coordinator's crash, and a dead one is
// replaced by a fresh process.
type procWorkers struct {
	l    *wire.Listener
	pool *workerproc.Pool

	mu    sync.Mutex
	slots map[int]*procSlot

	// lost counts the worker processes that died without a kill of the
	// run's (lostOnItsOwn).
	lost int

	// ended are every process the run started, as they ended (close
	// fills it in): what tests check for kills and orphans.
	ended []procEnd
}

type procEnd struct {
	id, pid int
	signal  syscall.Signal // 0: exited by itself
	err     error
}

// procSlot is one incarnation of a worker process and its connection.
type procSlot struct {
	id   int
	proc *workerproc.Process
	conn *wire.Conn
	// acquire is fork to joined.
	acquire time.Duration
	// gone is closed once the connection broke, at brokeAt.
	gone    chan struct{}
	brokeAt time.Time
	mu      sync.Mutex
	killed  time.Time
}

func (s *procSlot) brokenAt() time.Time {
	<-s.gone
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.brokeAt
}

func (s *procSlot) killedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

// startWorkers listens for the run's workers and starts n of them.
func (x *execution) startWorkers(ctx context.Context, n int, heartbeatTimeout time.Duration) (*procWorkers, error) {
	cmd := x.env.WorkerCommand
	if cmd == nil || cmd.Args == nil {
		return nil, errors.New("--workers process: this command cannot start worker processes")
	}
	for name, src := range x.env.Sources {
		if !src.Rereadable() {
			return nil, run.RefusedError{Err: fmt.Errorf("--workers process: input %s (%s) is forgetful, and a worker process cannot share its one reader; use --workers inproc", name, src.Spec())}
		}
	}
	token, err := wire.NewToken()
	if err != nil {
		return nil, err
	}
	inputs, err := absoluteInputs(x.plan.Inputs)
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(procConfig{Job: x.env.Config.Job, Params: x.env.Config.Params, Inputs: inputs,
		Seed: x.env.Config.Seed, Storage: x.env.Store.URL(), S3Endpoint: x.env.Config.S3Endpoint,
		StorageTimeout: x.env.Config.StorageTimeout, StorageOutageLimit: x.env.Config.StorageOutageLimit,
		RunID: x.env.Config.RunID, Plan: x.plan, Compression: x.compression, ReadBatch: x.readBatch})
	if err != nil {
		return nil, err
	}
	welcome, err := json.Marshal(run.WorkerWelcome{Executor: Executor{}.Name(), Config: cfg})
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if x.env.Log != nil {
			x.env.Log.Info(fmt.Sprintf(format, args...))
		}
	}
	l, err := wire.Listen("", wire.ListenConfig{Token: token, Conn: wire.Options{Alloc: x.env.Alloc, Log: logf, HeartbeatTimeout: heartbeatTimeout},
		Welcome: func(h wire.Hello) (wire.Welcome, error) {
			if id, err := strconv.Atoi(h.Worker); err != nil || id < 0 || id >= n {
				return wire.Welcome{}, fmt.Errorf("no worker %q in this run (workers are 0..%d)", h.Worker, n-1)
			}
			return wire.Welcome{Config: welcome}, nil
		}})
	if err != nil {
		return nil, err
	}
	pool, err := workerproc.NewPool(workerproc.Spec{Binary: cmd.Binary,
		Args: func(id int) []string { return cmd.Args(l.Addr(), id) },
		Env:  append(append([]string(nil), cmd.Env...), run.TokenEnv+"="+token), Log: logf})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	p := &procWorkers{l: l, pool: pool, slots: map[int]*procSlot{}}
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	if err := p.launch(ctx, ids...); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// launch starts a fresh process for each of ids and waits until all have
// joined.
func (p *procWorkers) launch(ctx context.Context, ids ...int) error {
	procs := map[int]*workerproc.Process{}
	actx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	for _, id := range ids {
		proc, err := p.pool.Start(id)
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
		c, hello, err := p.l.Accept(actx)
		if err != nil {
			for id, proc := range procs {
				if e := proc.Err(); e != nil || isExited(proc) {
					return fmt.Errorf("worker process %d exited before joining: %v", id, e)
				}
			}
			return fmt.Errorf("waiting for worker processes %v to join: %w", keys(procs), err)
		}
		id, _ := strconv.Atoi(hello.Worker)
		proc := procs[id]
		if proc == nil { // an incarnation this launch did not start
			_ = c.Close()
			continue
		}
		delete(procs, id)
		if err := awaitReady(actx, c, id); err != nil {
			_ = c.Close()
			return err
		}
		s := &procSlot{id: id, proc: proc, conn: c, acquire: p.pool.Joined(proc), gone: make(chan struct{})}
		go func() {
			<-c.Done()
			s.mu.Lock()
			s.brokeAt = time.Now()
			s.mu.Unlock()
			close(s.gone)
		}()
		p.mu.Lock()
		p.slots[id] = s
		p.mu.Unlock()
	}
	return nil
}

// awaitReady waits for worker id's first message: ready, once it has
// opened its inputs and the storage (acquire ends there), or why not.
func awaitReady(ctx context.Context, c *wire.Conn, id int) error {
	b, err := c.Control(ctx)
	if err != nil {
		return fmt.Errorf("worker process %d joined but never said it was ready: %w", id, err)
	}
	m, err := decodeMsg(b)
	switch {
	case err != nil:
		return fmt.Errorf("worker process %d: %w", id, err)
	case m.Op == opFailed:
		return fmt.Errorf("worker process %d could not start: %s", id, m.Text)
	case m.Op != opReady:
		return fmt.Errorf("worker process %d: %q before it was ready", id, m.Op)
	}
	return nil
}

// absoluteInputs are the input specs with a relative file: path made
// absolute: a worker process runs in a fresh directory of its own.
func absoluteInputs(specs map[string]string) (map[string]string, error) {
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

func isExited(proc *workerproc.Process) bool {
	select {
	case <-proc.Exited():
		return true
	default:
		return false
	}
}

func keys(m map[int]*workerproc.Process) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

func (p *procWorkers) slot(id int) *procSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slots[id]
}

// kill SIGKILLs worker id's process and waits until its connection is
// seen broken: it returns when it was killed and when it was declared dead.
func (p *procWorkers) kill(id int) (killed, detected time.Time, err error) {
	s := p.slot(id)
	if s == nil {
		return time.Time{}, time.Time{}, fmt.Errorf("no worker process %d", id)
	}
	if k := s.killedAt(); !k.IsZero() { // already killed: one death
		return k, s.brokenAt(), nil
	}
	s.mu.Lock()
	s.killed = time.Now() // before the signal: its attempt must see a kill
	s.mu.Unlock()
	at, err := p.pool.Kill(id)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	s.mu.Lock()
	s.killed = at
	s.mu.Unlock()
	return at, s.brokenAt(), nil
}

// replace starts a fresh process for worker id once the old one has
// exited, and returns its acquire time (fork to joined).
func (p *procWorkers) replace(ctx context.Context, id int) (time.Duration, error) {
	if s := p.slot(id); s != nil {
		if !isExited(s.proc) {
			// Declared dead while its process lives on (frozen, or its
			// connection cut): make sure of it before its replacement
			// starts, so no two incarnations share its work.
			if _, err := p.pool.Kill(id); err != nil {
				return 0, err
			}
		}
		<-s.proc.Exited()
	}
	if err := p.launch(ctx, id); err != nil {
		return 0, fmt.Errorf("replacing worker process %d: %w", id, err)
	}
	return p.slot(id).acquire, nil
}

// closeGrace is how long a worker process has to exit once its
// connection is closed at the end of a run, before it is killed.
const closeGrace = 2 * time.Second

// maxLost is how many worker processes may die on their own in one run
// before it fails: a worker that dies at every attempt (out of memory on
// the same unit, say) would otherwise be replaced forever.
const maxLost = 10

// lostOnItsOwn counts a worker process that died without a kill of the
// run's, and fails the run past maxLost.
func (p *procWorkers) lostOnItsOwn(d *workerDiedError) error {
	if !d.killed.IsZero() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lost++
	if p.lost > maxLost {
		return fmt.Errorf("%d worker processes died on their own (the last: %v); giving up", p.lost, d)
	}
	return nil
}

// close ends every worker process and stops listening: a worker whose
// connection closes exits, one that does not is killed. After it no
// process the run started is alive.
func (p *procWorkers) close() {
	p.mu.Lock()
	slots := p.slots
	p.mu.Unlock()
	for _, s := range slots {
		_ = s.conn.Close()
	}
	limit := time.NewTimer(closeGrace)
	defer limit.Stop()
	for _, s := range slots {
		select {
		case <-s.proc.Exited():
		case <-limit.C:
		}
	}
	_ = p.pool.Close()
	_ = p.l.Close()
	for _, proc := range p.pool.All() {
		p.ended = append(p.ended, procEnd{id: proc.ID, pid: proc.Pid(), signal: proc.Signaled(), err: proc.Err()})
	}
}
