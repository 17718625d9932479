package diskphase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// ServeWorker implements run.ProcessWorker: the worker process of a run
// with --workers process. It runs the unit attempts its coordinator sends,
// one at a time, with the same runMap and runReduce as a simulated worker,
// against the same durable storage and inputs; the ledger, the machine and
// the commit stay in the coordinator. It returns when the connection
// closes (the run is over, or the coordinator is gone).
func (Executor) ServeWorker(ctx context.Context, c *wire.Conn, config json.RawMessage, w run.WorkerEnv) error {
	var cfg procConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("diskphase worker: the configuration is not one: %w", err)
	}
	x, err := workerExecution(ctx, cfg, w)
	if err != nil {
		err = fmt.Errorf("diskphase worker %d: %w", w.ID, err)
		// The coordinator fails the run with the reason, rather than
		// replace a worker that cannot start.
		_ = run.SendFailed(c, err)
		return err
	}
	defer x.env.Close()
	if err := run.SendReady(c); err != nil {
		return nil // the coordinator is gone already
	}
	s := &served{x: x, c: c, id: w.ID, replies: make(chan procMsg, 1)}
	runs := make(chan servedRun)
	go s.readControl(ctx, runs)
	for r := range runs {
		done := s.serve(r)
		r.cancel()
		if err := send(c, done); err != nil {
			return nil // the coordinator is gone: so is the work
		}
	}
	return nil
}

// workerExecution builds the part of an execution a unit attempt uses,
// from the configuration alone.
func workerExecution(ctx context.Context, cfg procConfig, w run.WorkerEnv) (*execution, error) {
	j, env, err := cfg.WorkerRun.Open(ctx, cfg.Plan.Parallelism, w)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = env.Close()
		}
	}()
	topo, err := compile(j)
	if err != nil {
		return nil, err
	}
	splits, err := topo.splitsOf(env.Sources)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range splits {
		names = append(names, topo.inputs[s.input].name+"/"+s.name)
	}
	if !slices.Equal(names, cfg.Plan.Splits) {
		return nil, fmt.Errorf("the inputs split into %v here, into %v at the coordinator", names, cfg.Plan.Splits)
	}
	if cfg.ChunkRows <= 0 {
		return nil, fmt.Errorf("the coordinator sent a chunk budget of %d rows", cfg.ChunkRows)
	}
	counted := storage.NewCounting(env.PatientStore().Store())
	ok = true
	return &execution{env: env, store: counted, counted: counted, topo: topo, splits: splits, plan: cfg.Plan,
		compression: cfg.Compression, readBatch: cfg.ReadBatch, chunkRows: cfg.ChunkRows, names: newNames(j.Name, cfg.RunID),
		met: newMetrics(nil, time.Now()), handover: newHandoverLog()}, nil
}

// served is a worker process's side of its connection.
type served struct {
	x       *execution
	c       *wire.Conn
	id      int
	replies chan procMsg // the answer to the read or point in flight
}

type servedRun struct {
	msg    procMsg
	ctx    context.Context
	cancel context.CancelFunc
}

// readControl reads the coordinator's messages: a run starts an attempt
// (given to the serving loop with its own context, so a cancel that
// follows it at once finds it), a cancel ends the one running, and go and
// fail answer the attempt's read or point.
func (s *served) readControl(ctx context.Context, runs chan<- servedRun) {
	defer close(runs)
	var mu sync.Mutex
	cur := context.CancelFunc(func() {})
	for {
		b, err := s.c.Control(ctx)
		if err != nil {
			mu.Lock()
			cur()
			mu.Unlock()
			return
		}
		m, err := decodeMsg(b)
		if err != nil {
			s.x.env.Log.Warn("diskphase worker: closing the connection", "reason", err)
			_ = s.c.Close()
			continue
		}
		switch m.Op {
		case opRun:
			actx, cancel := context.WithCancel(ctx)
			mu.Lock()
			cur = cancel
			mu.Unlock()
			select {
			case runs <- servedRun{msg: m, ctx: actx, cancel: cancel}:
			case <-ctx.Done():
				return
			}
		case opCancel:
			mu.Lock()
			cur()
			mu.Unlock()
		case opGo, opFail:
			select {
			case s.replies <- m:
			default: // no question in flight: a stale answer
			}
		}
	}
}

// serve runs one attempt and returns its done message.
func (s *served) serve(r servedRun) procMsg {
	select { // an answer left over from a cancelled attempt
	case <-s.replies:
	default:
	}
	m := r.msg
	x := s.x
	x.met = newMetrics(nil, time.Now()) // this attempt's counts alone
	x.handover = newHandoverLog()
	a := &attempt{x: x, unit: m.Unit, num: m.Attempt, worker: m.Worker, rerun: m.Rerun}
	a.remote = &remoteGate{s: s, ctx: r.ctx}
	done := procMsg{Op: opDone, Unit: m.Unit, Attempt: m.Attempt}
	var err error
	switch {
	case m.Map != nil:
		x.followSchedule(m.Map, m.Pace)
		done.MapEntry, err = a.runMap(r.ctx, m.Map)
	case m.Reduce != nil:
		done.ReduceEntry, err = a.runReduce(r.ctx, m.Reduce)
	default:
		err = errors.New("a run message with no task")
	}
	if err != nil && r.ctx.Err() != nil {
		err = fmt.Errorf("cancelled by the coordinator: %w", err)
	}
	done.Err = toProcErr(err)
	done.Counts = x.met.procCounts()
	return done
}

// remoteGate is an attempt's crash points and record counting in a worker
// process: the coordinator decides, and kills this process rather than
// answer when a fault fires here.
type remoteGate struct {
	s   *served
	ctx context.Context
}

func (g *remoteGate) ask(m procMsg) error {
	if err := send(g.s.c, m); err != nil {
		return err
	}
	select {
	case r := <-g.s.replies:
		if r.Op == opFail {
			return errors.New(r.Text)
		}
		return nil
	case <-g.ctx.Done():
		return g.ctx.Err()
	}
}

func (g *remoteGate) point(name string) error {
	return g.ask(procMsg{Op: opPoint, Point: name, Counts: g.s.x.met.procCounts()})
}

// read reports n records read, with the hand-over stamps made since the
// last report: the coordinator keeps the log latency is measured from.
func (g *remoteGate) read(n int64) error {
	return g.ask(procMsg{Op: opRead, N: n, Stamps: g.s.x.handover.drain(), Counts: g.s.x.met.procCounts()})
}
