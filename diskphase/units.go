package diskphase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// attempt is one attempt of one unit on one worker. Everything it builds
// lives in its own memory and dies with it; only what it Puts to durable
// storage and hands back to the coordinator survives.
type attempt struct {
	x       *execution
	unit    UnitID
	num     int
	worker  int
	rerun   bool
	rec     *recoveryRec
	kill    func(*fault.Crash) // asks the cluster to kill another worker
	midDone bool
	// remote, in a worker process (--workers process), hands the crash
	// points and the record counts to the coordinator, which decides.
	remote *remoteGate
}

// point passes the named unit crash point as the attempt's worker; a
// crash ends the attempt like any other error it returns.
func (a *attempt) point(name string) error {
	if a.remote != nil {
		return a.remote.point(name)
	}
	return a.x.env.Faults.Point(name, a.worker)
}

// read accounts n records read from the source. A worker kill that names
// this worker ends the attempt here; one naming another worker is handed to
// the cluster, which kills that worker.
func (a *attempt) read(n int64) error {
	if a.remote != nil {
		return a.remote.read(n)
	}
	a.x.met.recordsRead(a.unit, n, a.rerun, a.rec)
	err := a.x.env.Faults.Read(n)
	if c, ok := fault.AsCrash(err); ok && c.Worker != a.worker {
		a.kill(c)
		return nil
	}
	return err
}

// midWrite is the encoder's half-way hook: the first file an attempt
// writes can be cut short there. The bytes encoded so far live only in the
// attempt's memory; durable storage never sees a prefix.
func (a *attempt) midWrite() error {
	if a.midDone {
		return nil
	}
	a.midDone = true
	return a.point(pointMidWrite)
}

// runMap runs a map unit: read the split's range, apply the stateless
// steps, partition by key, materialise each reduce partition's rows in
// chunks.
func (a *attempt) runMap(ctx context.Context, t *mapTask) (*MapEntry, error) {
	x := a.x
	sp := x.splits[t.Split]
	ic := x.topo.inputs[sp.input]
	rd, err := x.openSplit(ctx, t.Split, t.Start)
	if err != nil {
		return nil, err
	}
	defer rd.close()
	ops, err := job.OpenChain(ic.chain, operator.Context{Alloc: x.env.Alloc, Subtask: t.Split, Parallelism: len(x.splits), KeyGroups: keygroup.All})
	if err != nil {
		return nil, err
	}
	defer ops.Close()
	nparts := x.plan.Parallelism
	if x.topo.mapOnly() {
		nparts = 1
	}
	pt := newPartitioner(ic.names, nparts, ic.keyIdx, x.plan.Parallelism)
	ops.Link(operator.EmitFunc(pt.add))

	// Chunks go to storage as the unit's buffer fills (chunks.go); Puts
	// still in flight when an attempt fails are waited for here.
	pipe := newPutPipe(ctx, x.store)
	defer pipe.wait()
	cw := newChunkWriter(a, pipe, ic.names, nparts, x.chunkRows, func(r, k int) string {
		if x.topo.mapOnly() {
			return x.names.mapOutFile(t.Job, t.Split, a.num, k)
		}
		return x.names.mapFile(t.Job, t.Split, a.num, r, k)
	})

	ent := &MapEntry{Start: t.Start, End: t.Start, MaxTS: operator.NoWatermark}
	var deadline time.Time
	if x.plan.Mode == modeInterval && t.End < 0 {
		deadline = time.Now().Add(time.Duration(x.plan.IntervalMs) * time.Millisecond)
	}
	first := true
	expected := t.Start // where the next record of the range is
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		at := rd.at()
		limit := x.readBatch
		if t.End >= 0 {
			if at >= t.End {
				// A forgetful input may already be past the range: what
				// lay between is gone.
				ent.Lost += t.End - min(expected, t.End)
				expected = t.End
				break
			}
			limit = int(min(int64(limit), t.End-at))
		}
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			if !time.Now().Before(deadline) {
				break
			}
			rctx, cancel = context.WithDeadline(ctx, deadline)
		}
		b, from, to, err := rd.next(rctx, limit)
		cancel()
		if errors.Is(err, io.EOF) {
			ent.EOF = true
			break
		}
		if err != nil {
			if !deadline.IsZero() && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, fmt.Errorf("reading input %s partition %s: %w", ic.name, sp.name, err)
		}
		if from > expected {
			ent.Lost += from - expected
		}
		expected = to
		n := b.NumRows()
		x.handover.stamp(t.Split, from, to, time.Now())
		ent.Records += n
		if n > 0 {
			for _, v := range b.Column(source.IdxTS).(*array.Int64).Int64Values() {
				ent.MaxTS = max(ent.MaxTS, v)
			}
		}
		if err := a.read(n); err != nil {
			b.Release()
			return nil, err
		}
		err = ops.Process(0, b)
		b.Release()
		if err == nil {
			err = cw.maybeWrite(pt)
		}
		if err != nil {
			return nil, err
		}
		if first {
			first = false
			if err := a.point(pointMidRead); err != nil {
				return nil, err
			}
		}
	}
	ent.End = expected
	if err := ops.Flush(); err != nil {
		return nil, err
	}
	ent.EOF = ent.EOF || t.KnownEOF

	if ent.Files, err = cw.finish(pt); err != nil {
		return nil, err
	}
	if err := pipe.wait(); err != nil {
		return nil, err
	}
	if err := a.point(pointBeforeLedger); err != nil {
		return nil, err
	}
	return ent, nil
}

// runReduce runs a reduce unit: restore the state carried from the
// previous finite job, read this partition's chunks of every map unit, run
// the keyed operator, and materialise its output and its state. Both are
// written in chunks as they are made (chunks.go, state.go), so the unit
// holds its operator's state and a chunk or two, not its whole output and
// a copy of its state beside them.
func (a *attempt) runReduce(ctx context.Context, t *reduceTask) (*ReduceEntry, error) {
	x := a.x
	topo := x.topo
	p := x.plan.Parallelism
	octx := operator.Context{Alloc: x.env.Alloc, Subtask: t.Partition, Parallelism: p, KeyGroups: keygroup.RangeFor(t.Partition, p)}
	ops, err := job.OpenChain(append([]*job.Stage{topo.reduce}, topo.post...), octx)
	if err != nil {
		return nil, err
	}
	defer ops.Close()
	op := ops.Op(0)

	// Puts still in flight when an attempt fails are waited for here.
	pipe := newPutPipe(ctx, x.store)
	defer pipe.wait()
	out := newPartitioner(topo.outNames, 1, 0, p)
	outW := newChunkWriter(a, pipe, topo.outNames, 1, x.reduceBudget(), func(_, k int) string {
		return x.names.outFile(t.Job, t.Partition, a.num, k)
	})
	last := operator.EmitFunc(func(b arrow.RecordBatch) error {
		if err := out.add(b); err != nil {
			return err
		}
		return outW.maybeWrite(out)
	})
	if t.StateOnly {
		// The output of a committed job was published already.
		last = func(arrow.RecordBatch) error { return nil }
	}
	ops.Link(last)
	emit := ops.Emitter(0)

	ent := &ReduceEntry{}
	if t.StateIn != nil && t.StateIn.Name != "" {
		if err := a.restoreState(ctx, ops, *t.StateIn, t.StateProducer); err != nil {
			return nil, err
		}
	}
	if t.PrevWM != operator.NoWatermark {
		// Groups restored from state already stand here; the others learn
		// which rows are late.
		if err := op.AdvanceWatermark(t.PrevWM, emit); err != nil {
			return nil, err
		}
	}
	first := true
	for _, in := range t.Inputs {
		schema := topo.inputs[x.splits[in.Split].input].schema
		// One chunk at a time: what the unit holds is its state and the
		// chunk being read.
		for _, ch := range in.File.chunks() {
			if err := ctx.Err(); err != nil {
				return nil, context.Cause(ctx)
			}
			data, err := x.fetch(ctx, ch, in.Producer)
			if err != nil {
				return nil, err
			}
			n, err := decodeFile(data, ch, in.Producer, schema, x, func(b arrow.RecordBatch) error {
				return ops.Process(in.Port, b)
			})
			if err != nil {
				return nil, err
			}
			ent.RowsIn += n
			if a.rerun {
				x.met.rowsReread(a.unit, n)
			}
			if first {
				first = false
				if err := a.point(pointMidRead); err != nil {
					return nil, err
				}
			}
		}
	}
	// The steps after the keyed one are stateless: the watermark only
	// fires the keyed operator, its output flows through them.
	if err := ops.Flush(); err != nil {
		return nil, err
	}
	if err := ops.AdvanceWatermark(t.WM); err != nil {
		return nil, err
	}
	if lc, ok := op.(operator.LateCounter); ok {
		ent.LateRows = lc.LateRows()
	}

	if !t.StateOnly {
		files, err := outW.finish(out)
		if err != nil {
			return nil, err
		}
		ent.Out = files[0]
	}
	if st, ok := op.(operator.Stateful); ok {
		ref, err := a.writeState(st, pipe, x.reduceBudget(), func(k int) string {
			return x.names.stateFile(t.Job, t.Partition, a.num, k)
		})
		if err != nil {
			return nil, err
		}
		ent.State = &ref
	}
	if err := pipe.wait(); err != nil {
		return nil, err
	}
	if err := a.point(pointBeforeLedger); err != nil {
		return nil, err
	}
	return ent, nil
}
