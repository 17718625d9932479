package microbatch

// The data channels of a microbatch worker process (--workers process).
// A batch's intermediate data crosses processes only where the job moves
// it: the hash exchanges, and the rows the sink writes. Both go through
// the coordinator (see docs/workers.md, "microbatch in process mode"):
//
//   - up(s), worker to coordinator, one per stage s that feeds a hash
//     edge or the sink: for each other consumer its rows of s, and the
//     rows for the sink, each group after a header; an end header closes
//     the stage;
//   - down(s), coordinator to worker, one per stage s that feeds a hash
//     edge: for each consuming stage, every other producer's rows for
//     this worker, each after a header; an end header closes them.
//
// Headers are barriers (they keep their place between the batches) and
// name the batch attempt (seq), so what a rolled-back attempt left on a
// channel is recognised and dropped.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// upChannel and downChannel number a stage's channels on a connection.
func upChannel(si int) uint32   { return uint32(2*si + 1) }
func downChannel(si int) uint32 { return uint32(2*si + 2) }

// procHeader heads a group of batches on a data channel.
type procHeader struct {
	Seq int64 `json:"seq"`
	// up: a hash part for consumer Cons by Col, or (Out) the sink's rows.
	Col  string `json:"col,omitempty"`
	Cons int    `json:"cons,omitempty"`
	Out  bool   `json:"out,omitempty"`
	// down: producer Prod's rows for the consuming stage Stage.
	Stage int  `json:"stage,omitempty"`
	Prod  int  `json:"prod,omitempty"`
	End   bool `json:"end,omitempty"`
}

// hasUp says stage si sends its rows up: it feeds a hash edge or the sink.
func (t *topology) hasUp(si int) bool { return len(t.hashOut[si]) > 0 || si == t.sinkIn }

// hashInputs are the hash edges of stage si.
func (t *topology) hashInputs(si int) []job.Edge {
	var out []job.Edge
	for _, e := range t.stages[si].Inputs {
		if e.Exchange == job.Hash {
			out = append(out, e)
		}
	}
	return out
}

// checkProcessTopology refuses a job the process mode cannot move: a
// broadcast edge reads every producer's whole output, which no worker
// process holds.
func checkProcessTopology(t *topology) error {
	for _, st := range t.stages {
		for _, e := range st.Inputs {
			if e.Exchange == job.Broadcast {
				return fmt.Errorf("stage %s reads %s by broadcast, which worker processes do not exchange; use --workers inproc", st.ID, e.From)
			}
		}
	}
	return nil
}

func sendHeader(ctx context.Context, s *wire.Sender, h procHeader) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.Barrier(ctx, b)
}

// sendGroup sends a header and its batches.
func sendGroup(ctx context.Context, s *wire.Sender, h procHeader, bs []arrow.RecordBatch) error {
	if err := sendHeader(ctx, s, h); err != nil {
		return err
	}
	for _, b := range bs {
		if b == nil || b.NumRows() == 0 {
			continue
		}
		if err := s.Send(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// upData is what one worker sent up for one stage of a batch attempt.
type upData struct {
	hashed map[string][][]arrow.RecordBatch // col -> consumer -> batches
	out    []arrow.RecordBatch
}

func (u *upData) release() {
	for _, cons := range u.hashed {
		for _, bs := range cons {
			releaseAll(bs)
		}
	}
	releaseAll(u.out)
}

// collectUp reads one stage's groups from rx until the end header of
// attempt seq; groups of other attempts are dropped.
func collectUp(ctx context.Context, rx *wire.Receiver, seq int64, par int) (*upData, error) {
	u := &upData{hashed: map[string][][]arrow.RecordBatch{}}
	var cur *[]arrow.RecordBatch
	for {
		it, err := rx.Next(ctx)
		if err != nil {
			u.release()
			return nil, err
		}
		switch {
		case it.Batch != nil && cur == nil:
			it.Batch.Release()
		case it.Batch != nil:
			*cur = append(*cur, it.Batch)
		case it.End:
			u.release()
			return nil, fmt.Errorf("the worker closed its channel before the end of attempt %d", seq)
		default:
			var h procHeader
			if err := json.Unmarshal(it.Barrier, &h); err != nil {
				u.release()
				return nil, fmt.Errorf("a data header that is not one: %w", err)
			}
			cur = nil
			switch {
			case h.Seq != seq:
			case h.End:
				return u, nil
			case h.Out:
				cur = &u.out
			case h.Cons >= 0 && h.Cons < par:
				cons := u.hashed[h.Col]
				if cons == nil {
					cons = make([][]arrow.RecordBatch, par)
					u.hashed[h.Col] = cons
				}
				cur = &cons[h.Cons]
			}
		}
	}
}

// inbox is a worker process's down data: what the coordinator sent for
// each consuming stage of each attempt, by producer, until the stage
// takes it.
type inbox struct {
	mu      sync.Mutex
	changed chan struct{}
	groups  map[inboxKey][]arrow.RecordBatch
	ended   map[inboxKey]bool // Prod -1
	minSeq  int64
	err     error
}

type inboxKey struct {
	seq         int64
	stage, from int
	prod        int
}

func newInbox() *inbox {
	return &inbox{changed: make(chan struct{}), groups: map[inboxKey][]arrow.RecordBatch{}, ended: map[inboxKey]bool{}}
}

func (in *inbox) notifyLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// receive reads down channel rx of stage from until the connection ends.
func (in *inbox) receive(ctx context.Context, rx *wire.Receiver, from int) {
	var key *inboxKey
	for {
		it, err := rx.Next(ctx)
		if err != nil {
			in.mu.Lock()
			in.err = err
			in.notifyLocked()
			in.mu.Unlock()
			return
		}
		in.mu.Lock()
		switch {
		case it.Batch != nil && (key == nil || key.seq < in.minSeq):
			it.Batch.Release()
		case it.Batch != nil:
			in.groups[*key] = append(in.groups[*key], it.Batch)
		case it.End:
		default:
			var h procHeader
			key = nil
			if json.Unmarshal(it.Barrier, &h) == nil && h.Seq >= in.minSeq {
				k := inboxKey{seq: h.Seq, stage: h.Stage, from: from, prod: h.Prod}
				if h.End {
					k.prod = -1
					in.ended[k] = true
					in.notifyLocked()
				} else {
					key = &k
				}
			}
		}
		in.mu.Unlock()
	}
}

// take waits until the coordinator has sent everything of stage from for
// stage si of attempt seq, and returns it by producer (the caller owns
// the batches).
func (in *inbox) take(ctx context.Context, seq int64, si, from, par int) ([][]arrow.RecordBatch, error) {
	for {
		in.mu.Lock()
		if in.ended[inboxKey{seq, si, from, -1}] {
			out := make([][]arrow.RecordBatch, par)
			for p := range par {
				k := inboxKey{seq, si, from, p}
				out[p] = in.groups[k]
				delete(in.groups, k)
			}
			in.mu.Unlock()
			return out, nil
		}
		err, ch := in.err, in.changed
		in.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// drop forgets every attempt before seq (a new attempt began), or all.
func (in *inbox) drop(seq int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.minSeq = max(in.minSeq, seq)
	for k, bs := range in.groups {
		if k.seq < seq {
			releaseAll(bs)
			delete(in.groups, k)
		}
	}
	for k := range in.ended {
		if k.seq < seq {
			delete(in.ended, k)
		}
	}
}
