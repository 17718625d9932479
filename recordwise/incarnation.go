package recordwise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/recordwise/barrier"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// incarnation is one attempt at running the job: every task, channel,
// operator, reader, sink writer and the coordinator of that attempt. It is
// built only from durable storage, the re-opened sources and the sink (see
// newIncarnation); the run loop drops it whole when any of its workers or
// its coordinator dies. Nothing in it is ever handed to the next
// incarnation, which is what makes it impossible for restored code to read
// pre-crash memory: the next one has no reference to this one.
type incarnation struct {
	*shared
	attempt int

	ctx          context.Context
	cancel       context.CancelFunc
	workerCtx    []context.Context
	workerCancel []context.CancelFunc
	coordCtx     context.Context
	coordCancel  context.CancelFunc

	wg      sync.WaitGroup
	tasks   []*task
	byChain [][]*task
	queues  []*queue
	coord   *coordLoop
	from    checkpoint.ID // restored recovery point; 0 = the start
	// fromParts are the parts listed in the restored point's metadata.
	fromParts []metaPart
	// firstEpoch is the sink epoch the restored tasks write first: after
	// from, and after every epoch the sink already published.
	firstEpoch int64
	// published are the visible rows of the sink epochs in replayed (only
	// after a fallback past a committed recovery point); the sink tasks drop
	// their replays. replayed is written into every recovery point this
	// incarnation takes, so a later restore from one of them still drops
	// them (see reconcilePublished).
	published *publishedRows
	replayed  []epochSpan

	// What the start found and chose, and the read positions it resumed
	// from (input/partition -> offset), for the observer.
	listing     checkpoint.Listing
	rplan       checkpoint.RestorePlan
	partCounts  map[checkpoint.ID]int
	restoredPos map[string]int64

	// abandoned holds the checkpoints the coordinator gave up, so part
	// writers still running for them stop instead of leaving orphans.
	abandonedMu sync.Mutex
	abandoned   map[checkpoint.ID]bool
	// ckCtx cancels the part writes of a checkpoint when it is abandoned,
	// so the writes of a checkpoint given up on a storage stall do not
	// pile up behind the next ones.
	ckCtx map[checkpoint.ID]ckCancel

	outMu   sync.Mutex
	outcome *outcome
	done    chan struct{}
}

// shared is what every incarnation of one run reads: the environment, the
// resolved options, the plan and the observer. None of it is job state:
// the observer is written to, never read back by the job.
type shared struct {
	env    *run.Env
	opts   *options
	plan   *plan
	mode   barrier.Mode
	runID  string
	prefix string
	obs    *observer
	// patient is the run's clock on storage outages. Restores and the
	// listings of a recovery read through its retrying Store; a part or
	// metadata write makes one attempt (storeOnce): a failed write fails
	// its recovery point and the next one retries, until storage has not
	// answered for the run's limit.
	patient   *storage.Patient
	storeOnce storage.Store
}

type outcomeKind uint8

const (
	outDone outcomeKind = iota + 1
	outCrash
	outError
)

type outcome struct {
	kind  outcomeKind
	at    time.Time
	cause string
	err   error
}

func (inc *incarnation) settle(o outcome) {
	inc.outMu.Lock()
	defer inc.outMu.Unlock()
	if inc.outcome != nil {
		return
	}
	inc.outcome = &o
	close(inc.done)
}

// crash carries out an injected crash: the named worker's tasks (or the
// coordinator) stop at once; the others keep running until the run loop
// notices (after --detect-delay) and tears everything down.
func (inc *incarnation) crash(cr *fault.Crash, where checkpoint.TaskID) {
	now := time.Now()
	who := fmt.Sprintf("worker %d", cr.Worker)
	if cr.Worker < 0 {
		who = "the coordinator"
		inc.coordCancel()
	} else if cr.Worker < len(inc.workerCancel) {
		inc.workerCancel[cr.Worker]()
	}
	cause := fmt.Sprintf("%s killed (%s)", who, cr.Spec)
	if where != "" && cr.Spec.IsWorkerKill() {
		cause = fmt.Sprintf("%s killed (%s, noticed by %s)", who, cr.Spec, where)
	}
	inc.settle(outcome{kind: outCrash, at: now, cause: cause})
}

func (inc *incarnation) taskError(t *task, err error) {
	inc.settle(outcome{kind: outError, at: time.Now(), err: fmt.Errorf("task %s: %w", t.id, err)})
}

// stop cancels every goroutine of the incarnation and waits for them.
func (inc *incarnation) stop() {
	inc.cancel()
	inc.wg.Wait()
}

// teardown releases everything the incarnation holds, after stop: it is
// what the operating system does to a dead worker's memory.
func (inc *incarnation) teardown() {
	var lost int64
	for _, t := range inc.tasks {
		if t.src != nil {
			lost += t.src.release()
		}
		t.release()
	}
	for _, q := range inc.queues {
		for _, it := range q.drain() {
			it.release()
		}
	}
	inc.obs.addLost(lost)
	if inc.coord != nil {
		inc.coord.stopTimers()
	}
}

// newIncarnation restores the newest complete recovery point (if any) and
// builds a fresh set of tasks from it. It starts nothing.
func newIncarnation(ctx context.Context, sh *shared, attempt int) (inc *incarnation, err error) {
	inc = &incarnation{shared: sh, attempt: attempt, done: make(chan struct{})}
	inc.ctx, inc.cancel = context.WithCancel(ctx)
	inc.coordCtx, inc.coordCancel = context.WithCancel(inc.ctx)
	p := sh.plan.parallelism
	for w := 0; w < p; w++ {
		c, cancel := context.WithCancel(inc.ctx)
		inc.workerCtx = append(inc.workerCtx, c)
		inc.workerCancel = append(inc.workerCancel, cancel)
	}
	defer func() {
		if err != nil {
			inc.stop()
			inc.teardown()
		}
	}()

	rp, plan, err := inc.restore(inc.ctx)
	if err != nil {
		return inc, err
	}
	defer rp.release()
	if rp.found {
		inc.from, inc.fromParts = rp.id, rp.meta.Parts
	}
	complete := int64(-1)
	if rp.found {
		complete = int64(rp.id)
	}
	if err := sh.env.Sink.Recover(complete); err != nil {
		return inc, fmt.Errorf("sink recovery to epoch %d: %w", complete, err)
	}
	if err := inc.reconcilePublished(complete, rp.meta.Replayed); err != nil {
		return inc, err
	}
	if err := inc.build(rp); err != nil {
		return inc, err
	}
	inc.restoredPos = map[string]int64{}
	for _, t := range inc.tasks {
		if t.src != nil {
			for _, pr := range t.src.parts {
				inc.restoredPos[t.src.input+"/"+pr.name] = pr.pos.Offset
			}
		}
	}
	var ids []checkpoint.TaskID
	for _, t := range inc.tasks {
		ids = append(ids, t.id)
	}
	co, err := checkpoint.NewCoordinator(checkpoint.Config{
		Tasks: ids, Timeout: sh.env.Config.CheckpointTimeout, Retained: sh.env.Config.RetainedCheckpoints,
		// Checkpoint ids are the sink's epochs: never reuse one the sink
		// already published, even if its metadata is gone from the listing.
		NextID: max(plan.NextID, checkpoint.ID(inc.firstEpoch)), Completed: plan.Complete,
	})
	if err != nil {
		return inc, err
	}
	inc.coord = newCoordLoop(inc, co)
	return inc, nil
}

// build creates the tasks and channels of the plan, restoring operator
// state, watermarks, source positions and in-flight data from rp.
func (inc *incarnation) build(rp *restoredPoint) error {
	pl, env := inc.plan, inc.env
	p := pl.parallelism
	inc.byChain = make([][]*task, len(pl.chains))
	for _, c := range pl.chains {
		for sub := 0; sub < p; sub++ {
			t := &task{inc: inc, id: checkpoint.TaskID(fmt.Sprintf("%s-%d", c.name, sub)), ch: c, sub: sub,
				ctx: inc.workerCtx[sub], alloc: env.Alloc, wake: newWaker(),
				wm: operator.NoWatermark}
			inc.byChain[c.index] = append(inc.byChain[c.index], t)
			inc.tasks = append(inc.tasks, t)
		}
	}
	// Channels: inq[chain][sub][channel].
	inq := make([][][]*queue, len(pl.chains))
	for _, c := range pl.chains {
		inq[c.index] = make([][]*queue, p)
		for sub := 0; sub < p; sub++ {
			dst := inc.byChain[c.index][sub]
			qs := make([]*queue, c.inputChannels(p))
			for ch := range qs {
				_, from := c.channelPort(ch, sub, p)
				var in *chainInput
				for _, ci := range c.inputs {
					if ch >= ci.first && ch < ci.first+ci.channels(p) {
						in = ci
					}
				}
				src := inc.byChain[in.from.index][from]
				var delay time.Duration
				if inc.opts.hooks.channelDelay != nil {
					delay = inc.opts.hooks.channelDelay(in.from.name, from, c.name, sub)
				}
				qs[ch] = newQueue(inc.opts.channelBuffers, delay, dst.wake, src.wake)
				inc.queues = append(inc.queues, qs[ch])
			}
			inq[c.index][sub] = qs
			dst.in = qs
		}
	}
	for _, t := range inc.tasks {
		if err := inc.buildTask(t, rp, inq); err != nil {
			return err
		}
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
		t.ops = append(t.ops, op)
		if err := op.Open(operator.Context{Alloc: env.Alloc, Subtask: t.sub, Parallelism: p, KeyGroups: kgs}); err != nil {
			return fmt.Errorf("task %s: opening %s: %w", t.id, st.ID, err)
		}
		port := 0
		if i > 0 && len(st.Inputs) == 1 {
			port = st.Inputs[0].Port
		}
		t.ports = append(t.ports, port)
		if sf, ok := op.(operator.Stateful); ok && rp.found {
			var mine []operator.KeyGroupState
			for _, part := range rp.opStates[st.ID] {
				if kgs.Contains(part.KeyGroup) {
					mine = append(mine, part)
				}
			}
			if len(mine) > 0 {
				if err := sf.Restore(mine); err != nil {
					return fmt.Errorf("task %s: restoring %s from recovery point %d: %w", t.id, st.ID, rp.id, err)
				}
			}
		}
	}
	t.emitters = make([]operator.Emitter, len(t.ops))
	for i := range t.ops {
		if i+1 < len(t.ops) {
			next, port := i+1, t.ports[i+1]
			t.emitters[i] = operator.EmitFunc(func(b arrow.RecordBatch) error {
				return t.ops[next].Process(port, b, t.emitters[next])
			})
		} else {
			t.emitters[i] = operator.EmitFunc(t.tail)
		}
	}
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
		t.router = newRouter(env.Alloc, c.schema, inc.opts.bufferRows, env.Config.BufferTimeout, p)
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
			timeout: env.Config.BufferTimeout, obs: inc.obs, wake: t.wake,
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
		fromParts: inc.fromParts}
}

func (inc *incarnation) restoredOffsets() map[string]int64 { return inc.restoredPos }

// start launches every goroutine: reader goroutines, tasks, coordinator.
func (inc *incarnation) start() {
	for _, t := range inc.tasks {
		if t.src == nil {
			continue
		}
		for _, pr := range t.src.parts {
			inc.wg.Add(1)
			go readLoop(t.ctx, pr, inc.opts.readRows, t.wake, &inc.wg)
		}
	}
	for _, t := range inc.tasks {
		if t.snk != nil && t.snk.async() {
			inc.wg.Add(1)
			go t.snk.flusher(t.ctx, &inc.wg)
		}
		inc.wg.Add(1)
		go t.run()
	}
	inc.wg.Add(1)
	go inc.coord.run()
}

// partJob is a part handed from a task to its asynchronous writer.
type partJob struct {
	ctx      context.Context
	task     checkpoint.TaskID
	chain    string
	sub      int
	ck       *pendingCk
	handedAt time.Time
}

// writePart writes ck asynchronously and acknowledges it when durable.
func (inc *incarnation) writePart(t *task, ck *pendingCk, now time.Time) {
	j := partJob{ctx: t.ctx, task: t.id, chain: t.ch.name, sub: t.sub, ck: ck, handedAt: now}
	inc.wg.Add(1)
	go inc.partWriter(j)
}

func (inc *incarnation) partWriter(j partJob) {
	defer inc.wg.Done()
	ck := j.ck
	defer ck.release()
	start := time.Now()
	id := ck.id
	desc := partDesc{Version: layoutVersion, Task: string(j.task), Chain: j.chain, Subtask: j.sub,
		Checkpoint: uint64(id), Unaligned: ck.unaligned, Sources: ck.sources, InputWatermarks: ck.inWM,
		OutputWatermark: ck.outWM}
	var stateBytes, inFlightBytes, inFlightRecords int64
	written := 0
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	defer context.AfterFunc(inc.checkpointCtx(id), cancel)()
	put := func(key string, data []byte) bool {
		if ctx.Err() != nil || inc.isAbandoned(id) {
			return false // a dead worker or an abandoned checkpoint starts no write
		}
		if err := inc.storeOnce.Put(ctx, inc.prefix+key, data); err != nil {
			if ctx.Err() == nil {
				inc.coord.decline(id, j.task, "writing part: "+err.Error())
			}
			return false
		}
		written++
		if written == 1 {
			if err := inc.env.Faults.Point(PointMidPartWrite, j.sub); err != nil {
				if cr, ok := fault.AsCrash(err); ok {
					inc.crash(cr, j.task)
				}
				return false
			}
		}
		return true
	}
	var buf bytes.Buffer
	for _, o := range ck.ops {
		buf.Reset()
		if err := state.EncodeAll(&buf, string(j.task)+"/"+o.stage, o.parts); err != nil {
			inc.coord.decline(id, j.task, "encoding state: "+err.Error())
			return
		}
		key := opStateKey(id, j.task, o.stage)
		if !put(key, buf.Bytes()) {
			return
		}
		desc.Ops = append(desc.Ops, opObject{Stage: o.stage, Key: key, Bytes: int64(buf.Len()), KeyGroups: len(o.parts)})
		stateBytes += int64(buf.Len())
	}
	var streams []chanStream
	for _, ch := range sortedKeys(ck.inState) {
		streams = append(streams, chanStream{dir: dirInput, channel: ch, items: ck.inState[ch]})
	}
	for k, items := range ck.outState {
		if len(items) > 0 {
			streams = append(streams, chanStream{dir: dirOutput, channel: k, items: items})
		}
	}
	for _, s := range streams {
		for _, it := range s.items {
			if it.kind == kData {
				inFlightBytes += it.bytes()
				inFlightRecords += int64(it.rows())
			}
		}
	}
	if len(streams) > 0 {
		buf.Reset()
		if err := encodeChannels(&buf, streams); err != nil {
			inc.coord.decline(id, j.task, err.Error())
			return
		}
		key := channelsKey(id, j.task)
		if !put(key, buf.Bytes()) {
			return
		}
		desc.Channels = &objectRef{Key: key, Bytes: int64(buf.Len())}
		desc.InFlightRecords = inFlightRecords
	}
	data, err := json.Marshal(desc)
	if err != nil {
		inc.coord.decline(id, j.task, err.Error())
		return
	}
	if written == 0 {
		// Nothing but the descriptor: the crash point sits before it.
		if err := inc.env.Faults.Point(PointMidPartWrite, j.sub); err != nil {
			if cr, ok := fault.AsCrash(err); ok {
				inc.crash(cr, j.task)
			}
			return
		}
		written = -1
	}
	if !put(partKey(id, j.task), data) {
		return
	}
	stateBytes += int64(len(data))
	if err := inc.env.Faults.Point(PointBeforeAck, j.sub); err != nil {
		if cr, ok := fault.AsCrash(err); ok {
			inc.crash(cr, j.task)
		}
		return
	}
	if j.ctx.Err() != nil {
		return
	}
	done := time.Now()
	m := TaskCheckpointStats{
		Task:                          string(j.task),
		StartDelayMs:                  ms(ck.firstAt.Sub(ck.triggered)),
		AlignmentMs:                   ms(ck.snapAt.Sub(ck.firstAt)),
		CollectMs:                     ms(j.handedAt.Sub(ck.firstAt)),
		SyncMs:                        ms(ck.sync),
		AsyncMs:                       ms(done.Sub(start)),
		ProcessedDuringAlignmentBytes: ck.alignBytes,
		ProcessedDuringAlignmentRows:  ck.alignRecords,
		StateBytes:                    stateBytes,
		InFlightBytes:                 inFlightBytes,
		InFlightRecords:               inFlightRecords,
		Unaligned:                     ck.unaligned,
		TimedOut:                      ck.timedOut,
	}
	if ck.snapAt.Before(ck.firstAt) {
		m.AlignmentMs = 0
	}
	if ck.triggered.IsZero() {
		m.StartDelayMs = 0
	}
	inc.coord.ack(id, j.task, checkpoint.Part{Key: partKey(id, j.task), StateBytes: stateBytes,
		InFlightBytes: inFlightBytes, InFlightRecords: inFlightRecords, Durable: true}, m)
}

// stamp gives restored in-flight items a hand-over time: they are handed
// over again now.
func stamp(items []item, now time.Time) {
	for i := range items {
		items[i].born = now
		if items[i].kind == kData {
			items[i].births = []latEntry{{born: now, rows: int64(items[i].rows())}}
		}
	}
}

func (inc *incarnation) abandon(id checkpoint.ID) {
	inc.abandonedMu.Lock()
	if inc.abandoned == nil {
		inc.abandoned = map[checkpoint.ID]bool{}
	}
	inc.abandoned[id] = true
	if c, ok := inc.ckCtx[id]; ok {
		c.cancel()
		delete(inc.ckCtx, id)
	}
	inc.abandonedMu.Unlock()
}

type ckCancel struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// checkpointCtx is cancelled when checkpoint id is abandoned.
func (inc *incarnation) checkpointCtx(id checkpoint.ID) context.Context {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	if c, ok := inc.ckCtx[id]; ok {
		return c.ctx
	}
	ctx, cancel := context.WithCancel(inc.ctx)
	if inc.abandoned[id] {
		cancel()
		return ctx
	}
	if inc.ckCtx == nil {
		inc.ckCtx = map[checkpoint.ID]ckCancel{}
	}
	inc.ckCtx[id] = ckCancel{ctx, cancel}
	return ctx
}

// forgetCheckpoints drops the contexts of checkpoints up to id once id is
// complete: its parts are durable, and older ones are complete or
// abandoned.
func (inc *incarnation) forgetCheckpoints(id checkpoint.ID) {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	for k, c := range inc.ckCtx {
		if k <= id {
			c.cancel()
			delete(inc.ckCtx, k)
		}
	}
}

func (inc *incarnation) isAbandoned(id checkpoint.ID) bool {
	inc.abandonedMu.Lock()
	defer inc.abandonedMu.Unlock()
	return inc.abandoned[id]
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var errNoStore = errors.New("recordwise: no durable storage (--storage)")
