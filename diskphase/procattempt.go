package diskphase

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// cancelGrace is how long a worker process may take to stop an attempt
// its coordinator gave up before it is killed.
const cancelGrace = 5 * time.Second

// runRemote is a unit attempt on worker process a.worker: the run message,
// then the worker's reads and points answered (a fault that fires for this
// worker is a SIGKILL of its process, not an answer), until its done. res
// gets the entry or the error, and for a kill when it was sent and when the
// broken connection was seen.
func (x *execution) runRemote(ctx context.Context, a *attempt, task actRun, res *attemptResult) {
	s := x.procs.Slot(a.worker)
	if s == nil {
		res.err = fmt.Errorf("no worker process %d", a.worker)
		return
	}
	// What the attempt materialised so far, as its last message said: a
	// death loses the done message's counts, not these, so the run counts
	// a killed attempt's files as a simulated worker's are counted.
	var sofar map[int]procCounts
	defer func() { x.met.addProcCounts(sofar) }()
	died := func(reason error) {
		res.err = &workerDiedError{worker: a.worker, reason: reason, killed: s.KilledAt(), detected: s.BrokenAt()}
	}
	if err := send(s.Conn, procMsg{Op: opRun, Unit: a.unit, Attempt: a.num, Worker: a.worker, Rerun: a.rerun,
		Map: task.Map, Reduce: task.Reduce, Pace: x.splitSchedule(task.Map)}); err != nil {
		died(err)
		return
	}
	// The run over time sees the worker's reads as a local reader's.
	var sr *report.SeriesReader
	var pos int64
	if t := task.Map; t != nil {
		sp := x.splits[t.Split]
		sr, pos = x.env.SeriesReader(x.topo.inputs[sp.input].name, sp.partition, t.Start), t.Start
		defer sr.Close()
	}
	ownKill := func(cr *fault.Crash) {
		killed, detected, err := x.procs.Kill(a.worker)
		if err != nil {
			res.err = err
			return
		}
		res.err, res.killed, res.detected = cr, killed, detected
	}
	for {
		b, err := s.Conn.Control(ctx)
		if err != nil {
			if ctx.Err() == nil {
				died(err)
				return
			}
			res.err = x.abandonRemote(s, context.Cause(ctx))
			return
		}
		m, err := decodeMsg(b)
		if err != nil {
			_ = s.Conn.Close()
			died(err)
			return
		}
		if m.Counts != nil {
			sofar = m.Counts
		}
		var ferr error
		switch m.Op {
		case opRead:
			x.met.recordsRead(a.unit, m.N, a.rerun, a.rec)
			x.handover.stamped(m.Stamps)
			if len(m.Stamps) > 0 {
				pos = m.Stamps[len(m.Stamps)-1].To
			}
			sr.Read(m.N, pos)
			ferr = x.env.Faults.Read(m.N)
			if c, ok := fault.AsCrash(ferr); ok && c.Worker != a.worker {
				a.kill(c) // another worker's death: the coordinator carries it out
				ferr = nil
			}
		case opPoint:
			ferr = x.env.Faults.Point(m.Point, a.worker)
			if c, ok := fault.AsCrash(ferr); ok && c.Worker != a.worker {
				a.kill(c) // another worker's kill (after-point), as at a read
				ferr = nil
			}
		case opDone:
			res.m, res.r = m.MapEntry, m.ReduceEntry
			if m.Err != nil {
				res.m, res.r, res.err = nil, nil, m.Err.err(a.worker)
			}
			return
		default:
			_ = s.Conn.Close()
			died(fmt.Errorf("unexpected %q message", m.Op))
			return
		}
		if c, ok := fault.AsCrash(ferr); ok {
			ownKill(c)
			return
		}
		answer := procMsg{Op: opGo}
		if ferr != nil {
			answer = procMsg{Op: opFail, Text: ferr.Error()}
		}
		if err := send(s.Conn, answer); err != nil {
			died(err)
			return
		}
	}
}

// abandonRemote stops the attempt on s that its coordinator gave up
// (cause): a killed worker is waited for until its connection breaks; a
// live one is told to cancel and waited for, and killed if it does not
// stop in time. It returns cause, which the coordinator expects back.
func (x *execution) abandonRemote(s *run.FleetSlot, cause error) error {
	if !s.KilledAt().IsZero() {
		<-s.Gone()
		return cause
	}
	if send(s.Conn, procMsg{Op: opCancel}) == nil {
		limit := time.NewTimer(cancelGrace)
		defer limit.Stop()
		for {
			ctx, stop := context.WithTimeout(context.Background(), cancelGrace)
			b, err := s.Conn.Control(ctx)
			stop()
			if err != nil {
				break
			}
			if m, err := decodeMsg(b); err == nil && m.Op == opDone {
				return cause
			}
			select {
			case <-limit.C:
				_, _, _ = x.procs.Kill(s.ID)
				return cause
			default:
			}
		}
	}
	_, _, _ = x.procs.Kill(s.ID)
	return cause
}

// replaceProcess is the detect and acquire of a dead worker process in
// rec: detect measured from rec.At (the kill) to detected (the broken
// connection), acquire from the replacement's fork to its join; a
// modelled delay (--detect-delay, --acquire-delay) is waited out on top
// and marked modelled.
func (c *coordinator) replaceProcess(ctx context.Context, rec *recoveryRec, worker int, detected time.Time) error {
	x := c.x
	waited := &report.Crash{At: rec.At}
	r := x.env.Replacement()
	from := r.Detected(ctx, waited, detected)
	acquire, err := x.procs.Replace(ctx, worker)
	if err != nil {
		return err
	}
	if r.Acquire > 0 {
		r.Acquired(ctx, waited, from)
		acquire += *waited.Acquire
	}
	x.met.mu.Lock()
	rec.Detect, rec.Acquire, rec.Modelled = waited.Detect, &acquire, waited.Modelled
	x.met.mu.Unlock()
	return nil
}

// workerDown bills the death of worker w (cause) in a new recovery and
// waits out its replacement: modelled for a simulated worker (replace),
// measured for a worker process, killed at at (zero: it died on its own)
// and seen dead at detected.
func (c *coordinator) workerDown(ctx context.Context, cause string, w int, at, detected time.Time) (*recoveryRec, error) {
	if c.x.procs == nil {
		rec := c.x.met.newRecovery(cause, at, false)
		c.replace(ctx, rec)
		return rec, nil
	}
	if at.IsZero() {
		at = detected
	}
	rec := c.x.met.newRecovery(cause, at, false)
	return rec, c.replaceProcess(ctx, rec, w, detected)
}

// asDied is the worker process death inside err, if any.
func asDied(err error) (*workerDiedError, bool) {
	var d *workerDiedError
	ok := errors.As(err, &d)
	return d, ok
}
