package operator

import "github.com/apache/arrow-go/v18/arrow"

// Chain is the operators one task runs back to back: operator i emits into
// operator i+1 and the last into the sink the executor links (its exchange,
// partitioner or output buffer). Every executor builds, restores, drives and
// closes its operators through a Chain, so they agree on the order.
//
// Lifecycle: Open each operator in chain order, Restore the stateful ones,
// Link the sink, then Process input and Flush / AdvanceWatermark between
// units of input, Snapshot after a Flush, and finally Close. A Chain is used
// by one goroutine.
//
// Ownership, as in the package comment:
//   - From the call to Open on, the chain owns the operator: Close closes
//     it, also when Open itself failed.
//   - Process borrows its batch; the caller releases it after the call.
//   - The batch each operator emits is borrowed by the next operator (or by
//     the sink) for the duration of its Emit; the sink retains what it
//     keeps. The emitting operator releases its own reference.
//   - Emitting is allowed from Process, Flush and AdvanceWatermark only,
//     never from Close.
//   - Restore does not take over the parts: the caller releases them after
//     the call, whether or not it failed.
//   - Snapshot hands each operator's parts to the callback, which owns them.
//
// The emitters are built once by Link; driving the chain allocates nothing
// per batch beyond what the operators do.
type Chain struct {
	ops   []Operator
	ctxs  []Context
	ports []int
	emits []Emitter // emits[i] receives the output of ops[i]
	sink  Emitter
}

// Open takes op into the chain as its next operator and opens it with ctx.
// port is the input port op's predecessor in the chain emits into (unused
// for the first operator, whose port each Process call gives). The chain
// owns op even when Open fails, so the caller only closes the chain.
func (c *Chain) Open(op Operator, ctx Context, port int) error {
	c.ops = append(c.ops, op)
	c.ctxs = append(c.ctxs, ctx)
	c.ports = append(c.ports, port)
	return op.Open(ctx)
}

// New builds an operator with newOp and takes it in as Open does.
func (c *Chain) New(newOp func() (Operator, error), ctx Context, port int) error {
	op, err := newOp()
	if err != nil {
		return err
	}
	return c.Open(op, ctx, port)
}

// Restore loads operator i from those parts that belong to the key groups
// it was opened with. An operator that is not Stateful, or owns none of the
// parts, is left as opened. The caller keeps its references to parts.
func (c *Chain) Restore(i int, parts []KeyGroupState) error {
	sf, ok := c.ops[i].(Stateful)
	if !ok {
		return nil
	}
	kgs := c.ctxs[i].KeyGroups
	var mine []KeyGroupState
	for _, p := range parts {
		if p.Batch != nil && kgs.Contains(p.KeyGroup) {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return sf.Restore(mine)
}

// Link makes sink receive what the last operator emits (what Process is
// given, for a chain without operators) and links every operator to the
// next. Call it once, after the last Open.
func (c *Chain) Link(sink Emitter) {
	c.sink = sink
	c.emits = make([]Emitter, len(c.ops))
	for i := range c.ops {
		if i+1 == len(c.ops) {
			c.emits[i] = sink
			continue
		}
		next, port := i+1, c.ports[i+1]
		c.emits[i] = EmitFunc(func(b arrow.RecordBatch) error {
			return c.ops[next].Process(port, b, c.emits[next])
		})
	}
}

// Len is the number of operators in the chain.
func (c *Chain) Len() int { return len(c.ops) }

// Op is operator i.
func (c *Chain) Op(i int) Operator { return c.ops[i] }

// Emitter is what operator i emits into: the rest of the chain, then the
// sink. Valid after Link.
func (c *Chain) Emitter(i int) Emitter { return c.emits[i] }

// Process hands b (borrowed) to the first operator on port, or straight to
// the sink when the chain has no operators.
func (c *Chain) Process(port int, b arrow.RecordBatch) error {
	if len(c.ops) == 0 {
		return c.sink.Emit(b)
	}
	return c.ops[0].Process(port, b, c.emits[0])
}

// Flush flushes every operator in chain order, so what one emits on Flush
// is processed, and then flushed, by the ones after it.
func (c *Chain) Flush() error {
	for i, op := range c.ops {
		if err := op.Flush(c.emits[i]); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceWatermark delivers wm to every operator in chain order and flushes
// each right after, so the output its watermark released reaches the next
// operator before that one sees wm.
func (c *Chain) AdvanceWatermark(wm int64) error {
	for i, op := range c.ops {
		if err := op.AdvanceWatermark(wm, c.emits[i]); err != nil {
			return err
		}
		if err := op.Flush(c.emits[i]); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot snapshots every Stateful operator in chain order and hands
// operator i's parts to keep, which owns them from then on. It stops at the
// first failure and returns the failing operator's index with the error.
// Flush first: an operator refuses a snapshot with output pending.
func (c *Chain) Snapshot(keep func(i int, parts []KeyGroupState)) (int, error) {
	for i, op := range c.ops {
		sf, ok := op.(Stateful)
		if !ok {
			continue
		}
		parts, err := sf.Snapshot()
		if err != nil {
			return i, err
		}
		keep(i, parts)
	}
	return -1, nil
}

// Close closes every operator, also after one of them failed, and returns
// the first error. The chain is empty afterwards; closing it again does
// nothing.
func (c *Chain) Close() error {
	var first error
	for _, op := range c.ops {
		if err := op.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.ops, c.ctxs, c.ports, c.emits = nil, nil, nil, nil
	return first
}
