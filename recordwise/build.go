package recordwise

// This file holds how an incarnation builds its tasks: the channels
// between them, each task's operators restored from the checkpoint it
// resumes from, and the restored source offsets.

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// build creates the tasks and channels of the plan, restoring operator
// state, watermarks, source positions and in-flight data from rp.
func (inc *incarnation) build(rp *restoredPoint) error {
	pl, env := inc.plan, inc.env
	p := pl.parallelism
	inc.byChain = make([][]*task, len(pl.chains))
	for _, c := range pl.chains {
		inc.byChain[c.index] = make([]*task, p)
		for sub := 0; sub < p; sub++ {
			if !inc.runsHere(sub) {
				continue // another worker process runs it
			}
			t := &task{inc: inc, id: checkpoint.TaskID(taskLane(c, sub)), ch: c, sub: sub,
				ctx: inc.workerCtx[sub], alloc: env.Alloc, wake: newWaker(),
				wm: operator.NoWatermark}
			inc.byChain[c.index][sub] = t
			inc.tasks = append(inc.tasks, t)
		}
	}
	links := pl.links()
	next := 0 // the link of the channel at hand, in plan order
	// Channels: inq[chain][sub][channel]; names, when traced, their ends.
	inq := make([][][]*queue, len(pl.chains))
	var names map[*queue][2]string
	if env.Trace != nil {
		names = map[*queue][2]string{}
	}
	for _, c := range pl.chains {
		inq[c.index] = make([][]*queue, p)
		for sub := 0; sub < p; sub++ {
			dst := inc.byChain[c.index][sub]
			qs := make([]*queue, c.inputChannels(p))
			for ch := range qs {
				l := links[next]
				next++
				src := inc.byChain[l.from.index][l.fromSub]
				if src == nil && dst == nil {
					continue // between two tasks of other processes
				}
				var delay time.Duration
				if inc.opts.hooks.channelDelay != nil {
					delay = inc.opts.hooks.channelDelay(l.from.name, l.fromSub, c.name, sub)
				}
				// A channel to or from another process is a local queue
				// with a pump at its far end (wirelink.go).
				var consumer, producer waker
				switch {
				case dst == nil:
					consumer, producer = newWaker(), src.wake
				case src == nil:
					consumer, producer = dst.wake, newWaker()
				default:
					consumer, producer = dst.wake, src.wake
				}
				qs[ch] = newQueue(inc.opts.channelBuffers, delay, consumer, producer)
				switch {
				case dst == nil:
					inc.side.sends = append(inc.side.sends, sideLink{link: l, q: qs[ch], wake: consumer})
				case src == nil:
					inc.side.receives = append(inc.side.receives, sideLink{link: l, q: qs[ch], wake: producer})
				case names != nil:
					names[qs[ch]] = [2]string{string(src.id), string(dst.id)}
				}
				inc.queues = append(inc.queues, qs[ch])
			}
			inq[c.index][sub] = qs
			if dst != nil {
				dst.in = qs
			}
		}
	}
	for _, t := range inc.tasks {
		if err := inc.buildTask(t, rp, inq); err != nil {
			return err
		}
	}
	if names != nil {
		inc.traceChannels(names)
	}
	// Re-inject in-flight data: on each channel, what the receiver
	// persisted (it preceded the barrier), then what the sender's barrier
	// overtook (it followed the barrier), before any new input. A rescaled
	// point holds none (restore refuses one that does).
	if rp.found && !rp.rescaled {
		now := time.Now()
		for _, c := range pl.chains {
			for sub := 0; sub < p; sub++ {
				t := inc.byChain[c.index][sub]
				if t == nil {
					continue
				}
				lp := rp.parts[t.id]
				if lp == nil {
					continue
				}
				for ch, items := range lp.in {
					if ch >= len(t.in) {
						return fmt.Errorf("recovery point %d: task %s has no input channel %d", rp.id, t.id, ch)
					}
					stamp(items, now)
					t.in[ch].prefill(items)
					lp.in[ch] = nil
				}
			}
		}
		for _, c := range pl.chains {
			for sub := 0; sub < p; sub++ {
				t := inc.byChain[c.index][sub]
				if t == nil {
					continue
				}
				lp := rp.parts[t.id]
				if lp == nil || t.router == nil {
					continue
				}
				for k, items := range lp.out {
					if k >= len(t.router.outs) {
						return fmt.Errorf("recovery point %d: task %s has no output channel %d", rp.id, t.id, k)
					}
					stamp(items, now)
					t.router.outs[k].q.prefill(items)
					lp.out[k] = nil
				}
			}
		}
	}
	return nil
}

func (inc *incarnation) buildTask(t *task, rp *restoredPoint, inq [][][]*queue) error {
	pl, env := inc.plan, inc.env
	p := pl.parallelism
	c := t.ch
	var lp *loadedPart
	if rp.found && !rp.rescaled {
		lp = rp.parts[t.id]
		if lp == nil {
			return fmt.Errorf("recovery point %d has no part for task %s", rp.id, t.id)
		}
	}
	// Operators.
	kgs := keygroup.RangeFor(t.sub, p)
	for i, st := range c.ops {
		op, err := st.New()
		if err != nil {
			return fmt.Errorf("task %s: building %s: %w", t.id, st.ID, err)
		}
		port := 0
		if i > 0 && len(st.Inputs) == 1 {
			port = st.Inputs[0].Port
		}
		if err := t.ops.Open(op, operator.Context{Alloc: env.Alloc, Subtask: t.sub, Parallelism: p, KeyGroups: kgs}, port); err != nil {
			return fmt.Errorf("task %s: opening %s: %w", t.id, st.ID, err)
		}
		if rp.found {
			if err := t.ops.Restore(i, rp.opStates[st.ID]); err != nil {
				return fmt.Errorf("task %s: restoring %s from recovery point %d: %w", t.id, st.ID, rp.id, err)
			}
		}
	}
	t.ops.Link(operator.EmitFunc(t.tail))
	// Inputs.
	if n := len(t.in); n > 0 {
		h, err := barrier.New[item](n, inc.mode)
		if err != nil {
			return err
		}
		t.handler = h
		t.inWM = make([]int64, n)
		for i := range t.inWM {
			t.inWM[i] = operator.NoWatermark
		}
		if lp != nil && len(lp.desc.InputWatermarks) == n {
			copy(t.inWM, lp.desc.InputWatermarks)
		}
		if w, ok := rp.chainWM[c.name]; ok {
			for i := range t.inWM {
				t.inWM[i] = w.in
			}
		}
	}
	if lp != nil {
		t.wm = lp.desc.OutputWatermark
	}
	if w, ok := rp.chainWM[c.name]; ok {
		t.wm = w.out
	}
	// Outputs.
	if len(c.outputs) > 0 {
		t.router = newRouter(env.Alloc, c.schema, inc.opts.bufferRows, inc.opts.settings.BufferTimeout, p)
		t.router.lastWM = t.wm
		for _, o := range c.outputs {
			var qs []*queue
			if o.exchange == job.Forward {
				qs = append(qs, inq[o.to.index][t.sub][o.input.first])
			} else {
				for j := 0; j < p; j++ {
					qs = append(qs, inq[o.to.index][j][o.input.first+t.sub])
				}
			}
			t.router.addEdge(o.exchange, o.keyCol, qs)
		}
	}
	if c.sink {
		t.snk = &sinkTail{mode: env.Sink.Mode(), epoch: inc.firstEpoch,
			published: inc.published.clone(), alloc: t.alloc,
			timeout: inc.opts.settings.BufferTimeout, obs: inc.obs, wake: t.wake, delay: inc.opts.hooks.flushDelay,
			req: make(chan flushReq), done: make(chan error, 1),
			hold: func(epoch int64, rows []latEntry) { inc.coord.hold(checkpoint.ID(epoch), rows) }}
		for i := range t.snk.ws {
			w, err := env.Sink.Writer(t.sub, inc.attempt)
			if err != nil {
				return fmt.Errorf("task %s: sink writer: %w", t.id, err)
			}
			t.snk.ws[i] = w
		}
		t.rate = inc.opts.sinkTaskRate
	}
	// Source.
	if c.source != nil {
		src, ok := env.Sources[c.source.Input]
		if !ok {
			return fmt.Errorf("job %s needs input %q, which was not given", pl.job.Name, c.source.Input)
		}
		h, err := openSourceHead(t.ctx, c.source.Input, src, t.sub, p, pl.job.Params.MaxDisorder, rp.sources[c.source.Input], env.Alloc)
		if err != nil {
			return err
		}
		t.src = h
	}
	return nil
}

func (inc *incarnation) restoreInfo() RestoreInfo {
	return RestoreInfo{Attempt: inc.attempt, From: inc.from, Listing: inc.listing, Plan: inc.rplan, Parts: inc.partCounts,
		fromParts: inc.fromParts, bytes: inc.restoreBytes}
}

func (inc *incarnation) restoredOffsets() map[string]int64 { return inc.restoredPos }
