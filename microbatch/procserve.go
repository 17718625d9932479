package microbatch

// This file is a microbatch worker process's side of a batch (--workers
// process): its readers, the stages it runs on the same operators as a
// simulated worker (runStage), and the state version it writes. What it
// measures and every fault decision are the coordinator's: it reports its
// reads and asks at its crash points (procmsg.go).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// serve answers the coordinator's requests, one at a time in the order
// sent, until the connection closes. The answers to the worker's own
// requests (reads, points) are handed to their callers as they come.
func (pw *procWorker) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	pw.ctx = ctx
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		pw.wg.Wait() // the links' watchers, ended by cancel
		pw.dropBatch()
		pw.inbox.drop(1 << 62)
		if pw.w != nil {
			pw.w.closeReaders()
		}
	}()
	for si := range pw.topo.stages {
		if pw.topo.hasUp(si) {
			s, err := pw.conn.OpenSender(upChannel(si), pw.topo.stages[si].Schema, pw.env.Alloc)
			if err != nil {
				return pw.ended(err)
			}
			pw.up[si] = s
		}
	}
	reqs := make(chan procMsg, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for m := range reqs {
			reply, err := pw.handle(ctx, m)
			if m.ID != 0 {
				if f := pw.env.Trace.Drain(); !f.Empty() {
					reply.Trace = &f
				}
				if sendMsg(pw.conn, answer(m, reply, err)) != nil {
					cancel()
				}
			}
		}
	}()
	defer close(reqs)
	for {
		b, err := pw.conn.Control(ctx)
		if err != nil {
			return nil // the run is over, or the coordinator is gone
		}
		m, err := decodeMsg(b)
		switch {
		case err != nil:
			return fmt.Errorf("microbatch worker %d: %w", pw.id, err)
		case m.Op == opAnswer:
			pw.peer.delivered(m)
		case m.Op == opPeerGone:
			// Here, not in turn: the request in hand may be the stage
			// waiting for that peer.
			pw.mesh.Gone(m.GonePeer-1, m.GoneAddr)
		default:
			select {
			case reqs <- m:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// ended is err, or nil when the connection closed first (the run is over,
// or the coordinator is gone).
func (pw *procWorker) ended(err error) error {
	if pw.conn.Err() != nil {
		return nil
	}
	return fmt.Errorf("microbatch worker %d: %w", pw.id, err)
}

// handle carries out one request of the coordinator's.
func (pw *procWorker) handle(ctx context.Context, m procMsg) (procMsg, error) {
	switch m.Op {
	case opReset:
		return pw.reset(ctx, m)
	case opStartReaders:
		return procMsg{}, pw.startReaders()
	case opAvail:
		return pw.avail(), nil
	case opMaxTS:
		return pw.maxTS(m)
	case opBegin:
		return pw.begin(m)
	case opStage:
		return pw.stage(ctx, m)
	case opSnapshot:
		return pw.snapshot()
	case opEncode:
		return pw.encode(m)
	case opPut:
		return procMsg{}, pw.put(ctx)
	case opDurable:
		if pw.w != nil {
			pw.w.changesDurable()
		}
		return procMsg{}, nil
	}
	return procMsg{}, fmt.Errorf("microbatch worker %d: unknown request %q", pw.id, m.Op)
}

// reopen starts this worker's readers again at ends (per global
// partition), dropping what the old ones held.
func (pw *procWorker) reopen(ctx context.Context, ends []int64) error {
	w := pw.w
	w.closeReaders()
	if len(ends) != len(pw.topo.parts) {
		return fmt.Errorf("%d read positions for %d partitions", len(ends), len(pw.topo.parts))
	}
	rctx, cancel := context.WithCancel(ctx)
	w.rctx, w.cancel = rctx, cancel
	for _, p := range pw.topo.parts {
		if p.owner != pw.id {
			continue
		}
		r, err := p.src.Open(rctx, p.index, source.Position{Partition: p.name, Offset: ends[p.global]}, pw.env.Alloc)
		if err != nil {
			return fmt.Errorf("opening %s partition %s at %d: %w", p.input, p.name, ends[p.global], err)
		}
		w.readers = append(w.readers, &partReader{part: p, q: newPartQueue(ends[p.global]), reader: r, done: make(chan struct{})})
	}
	return nil
}

// startReaders starts the readers reopen opened, once the coordinator has
// the worker in its slot (a read can kill any worker).
func (pw *procWorker) startReaders() error {
	w := pw.w
	if w == nil || w.rctx == nil {
		return errors.New("readers started before they were opened")
	}
	if w.started {
		return nil
	}
	rctx := w.rctx
	cfg := readerConfig{rows: pw.cfg.ReadBatchRows, limit: pw.cfg.PrefetchRecords, stop: w.stop,
		report: func(g int, n, pos int64) {
			// The coordinator answers once it has counted the read; a
			// fault for this worker is answered by a SIGKILL instead.
			_, _ = pw.peer.call(rctx, procMsg{Op: opRead, Part: g, N: n, Pos: pos})
		}}
	w.started = true
	for _, pr := range w.readers {
		go pr.loop(rctx, cfg)
	}
	return nil
}

func (pw *procWorker) avail() procMsg {
	var out procMsg
	if pw.w == nil {
		return out
	}
	for _, r := range pw.w.readers {
		pos, eof, err := r.q.available()
		a := partAvail{Part: r.part.global, Pos: pos, EOF: eof}
		if err != nil {
			a.Err = err.Error()
		}
		out.Avail = append(out.Avail, a)
	}
	return out
}

func (pw *procWorker) maxTS(m procMsg) (procMsg, error) {
	if len(m.Ranges) != len(pw.topo.parts) || pw.w == nil {
		return procMsg{}, fmt.Errorf("%d ranges for %d partitions", len(m.Ranges), len(pw.topo.parts))
	}
	out := make([]int64, len(m.Ranges))
	for g, rg := range m.Ranges {
		out[g] = operator.NoWatermark
		if q := pw.w.queueOf(g); q != nil && rg.End > rg.Start {
			out[g] = q.maxTS(rg.Start, rg.End)
		}
	}
	return procMsg{MaxTS: out}, nil
}

// begin starts batch attempt m.Seq: what an earlier attempt held is
// dropped, and so is the input before the batch's start, which a
// committed batch consumed.
func (pw *procWorker) begin(m procMsg) (procMsg, error) {
	if pw.w == nil || m.Plan == nil || len(m.Plan.Ranges) != len(pw.topo.parts) {
		return procMsg{}, errors.New("a batch before the operators were restored, or a plan of other partitions")
	}
	pw.dropBatch()
	pw.inbox.drop(m.Seq)
	if err := pw.setPeers(m.Peers); err != nil {
		return procMsg{}, err
	}
	for _, r := range pw.w.readers {
		r.q.release(m.Plan.Ranges[r.part.global].Start)
	}
	pw.seq = m.Seq
	pw.bd = newBatchData(pw.topo, pw.cfg.Parallelism)
	par := pw.cfg.Parallelism
	pw.se = &stageEnv{ctx: pw.ctx, topo: pw.topo, plan: m.Plan, bd: pw.bd, workers: par, alloc: pw.env.Alloc,
		trace: pw.env.Trace, rerun: m.Rerun,
		eventTime: pw.topo.job.UsesEventTime, midRunDone: make([]bool, par), reread: make([]bool, par),
		onCrash: func(*fault.Crash) {},
		askPoint: func(name string, _ int) error {
			_, err := pw.peer.call(pw.ctx, procMsg{Op: opPoint, Point: name})
			if errors.Is(err, errPeerGone) {
				return errWorkerKilled
			}
			return err
		}}
	return procMsg{}, nil
}

func (pw *procWorker) dropBatch() {
	if pw.bd != nil {
		pw.bd.release()
		pw.bd, pw.se = nil, nil
	}
	for _, s := range pw.snaps {
		s.release()
	}
	pw.snaps, pw.blobs = nil, nil
}

// stage runs stage m.Stage of the batch on this worker's subtask: the
// other producers' rows of its hash edges arrive on the down channels
// first; its own rows for the other consumers, and for the sink, go up.
func (pw *procWorker) stage(ctx context.Context, m procMsg) (procMsg, error) {
	si := m.Stage
	if si < 0 || si >= len(pw.topo.stages) {
		return procMsg{}, fmt.Errorf("stage %d of a job with %d", si, len(pw.topo.stages))
	}
	// The coordinator reads a stage's up channel to its end, whatever the
	// stage's fate: every way out of a stage that sends up ends it.
	refuse := func(err error) (procMsg, error) {
		if pw.topo.hasUp(si) {
			_ = sendHeader(ctx, pw.up[si], procHeader{Seq: m.Seq, End: true})
		}
		return procMsg{PeerLost: peerLost(err)}, err
	}
	if pw.se == nil || m.Seq != pw.seq {
		return refuse(fmt.Errorf("stage %d of attempt %d, but attempt %d is in flight", si, m.Seq, pw.seq))
	}
	bd := pw.bd
	var exchanged int64 // rows taken from the other workers
	for _, e := range pw.topo.hashInputs(si) {
		from := pw.topo.index[e.From]
		got, err := pw.inbox.take(ctx, pw.seq, from, e.KeyColumn, pw.id, pw.peers)
		if err != nil {
			return refuse(err)
		}
		for prod, bs := range got {
			if prod == pw.id {
				releaseAll(bs) // its own part never leaves it
				continue
			}
			for _, b := range bs {
				exchanged += b.NumRows()
			}
			per := bd.hashed[from][e.KeyColumn]
			per[prod] = make([][]arrow.RecordBatch, pw.cfg.Parallelism)
			per[prod][pw.id] = bs
		}
	}
	rowsIn, late, hand := bd.rowsIn[pw.id], bd.late[pw.id], len(bd.handover[pw.id])
	err := pw.w.runStage(pw.se, si)
	if pw.topo.exchanges(si) {
		if xerr := pw.sendExchange(ctx, si, err == nil); xerr != nil && err == nil {
			err = xerr
		}
	}
	if pw.topo.hasUp(si) {
		if uerr := pw.sendUp(ctx, si, err == nil); uerr != nil && err == nil {
			err = uerr
		}
	}
	if errors.Is(err, errWorkerKilled) {
		return procMsg{Killed: true}, nil
	}
	reply := procMsg{RowsIn: bd.rowsIn[pw.id] - rowsIn, Late: bd.late[pw.id] - late, Exchanged: exchanged, PeerLost: peerLost(err)}
	for _, h := range bd.handover[pw.id][hand:] {
		reply.Handover = append(reply.Handover, [2]int64{h.at.UnixNano(), h.rows})
	}
	return reply, err
}

// sendUp sends the sink's rows of stage si (none when the stage failed),
// then the stage's end.
func (pw *procWorker) sendUp(ctx context.Context, si int, ok bool) error {
	s := pw.up[si]
	if ok {
		if err := sendGroup(ctx, s, procHeader{Seq: pw.seq, Out: true}, pw.bd.out[si][pw.id]); err != nil {
			return err
		}
	}
	return sendHeader(ctx, s, procHeader{Seq: pw.seq, End: true})
}

// snapshot takes this worker's snapshot of every stateful stage against
// its base, and says what changed; encode writes nothing yet.
func (pw *procWorker) snapshot() (procMsg, error) {
	pw.dropBatch()
	var out procMsg
	for si, st := range pw.topo.stateful {
		if !st {
			continue
		}
		s, err := pw.w.takeSnapshot(si, pw.env.Alloc)
		if err != nil {
			return out, fmt.Errorf("snapshot of stage %s subtask %d: %w", pw.topo.stages[si].ID, pw.id, err)
		}
		pw.snaps = append(pw.snaps, s)
		out.Snaps = append(out.Snaps, procSnap{Stage: si, Rows: s.rows, Bytes: s.bytes, ChangedRows: s.changedRows,
			Changed: len(s.changes) > 0 || len(s.deleted) > 0, Deleted: s.deleted})
	}
	return out, nil
}

// workerObjectName is worker w's object of stage in version v: every
// worker process writes its own key groups (one object per stage and
// subtask, which the manifest's chains name like any other).
func workerObjectName(v int64, stage string, w int) string {
	return stateObjectName(v, stage) + "-s" + strconv.Itoa(w)
}

// encode encodes the snapshots taken into this worker's objects of
// version m.Batch (full or deltas against its base), which becomes the
// base of the next version; put writes them.
func (pw *procWorker) encode(m procMsg) (procMsg, error) {
	defer func() {
		for _, s := range pw.snaps {
			s.release()
		}
		pw.snaps = nil
	}()
	var out procMsg
	if m.Skip {
		return out, nil
	}
	pw.blobs = map[string][]byte{}
	for _, s := range pw.snaps {
		id := pw.topo.stages[s.si].ID
		name := workerObjectName(m.Batch, id, pw.id)
		blob, whole, edited, err := encodeStage(name, []*stageSnap{s}, m.Full)
		if err != nil {
			return out, fmt.Errorf("encoding state of stage %s: %w", id, err)
		}
		e := procEncoded{Stage: s.si, Whole: whole, Edited: edited}
		if blob != nil {
			e.Name, e.Bytes = name, int64(len(blob))
			pw.blobs[name] = blob
		}
		s.keepAsBase()
		out.Encoded = append(out.Encoded, e)
	}
	return out, nil
}

// put writes the objects encoded, in parallel.
func (pw *procWorker) put(ctx context.Context) error {
	prefix := runPrefix(pw.topo.job.Name, pw.cfg.RunID)
	var fns []func() error
	for name, blob := range pw.blobs {
		fns = append(fns, func() error {
			if err := pw.store.Put(ctx, prefix+name, blob); err != nil {
				return fmt.Errorf("writing state object %s: %w", name, err)
			}
			return nil
		})
	}
	pw.blobs = nil
	if len(fns) == 0 {
		return nil
	}
	return runAll(fns)
}
