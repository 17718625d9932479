package microbatch

// The data channels of a microbatch worker process (--workers process).
// A batch's intermediate data crosses processes only where the job moves
// it: the hash exchanges, and the rows the sink writes (see
// docs/workers.md, "microbatch in process mode"):
//
//   - exch(s), worker to worker, straight over their mesh connection
//     (wire.Mesh), one each way per stage s that feeds a hash edge: as
//     stage s ends on the producer, for each key column its rows for the
//     consumer, each group after a header, then an end header;
//   - up(s), worker to coordinator, for the stage s that feeds the sink:
//     its rows for the sink after a header, then an end header.
//
// Headers are barriers (they keep their place between the batches) and
// name the batch attempt (seq), so what a rolled-back attempt left on a
// channel is recognised and dropped.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// upChannel numbers a stage's channel to the coordinator, exchChannel
// its hash exchange on a connection between two workers.
func upChannel(si int) uint32   { return uint32(2*si + 1) }
func exchChannel(si int) uint32 { return uint32(2*si + 2) }

// procHeader heads a group of batches on a data channel.
type procHeader struct {
	Seq int64 `json:"seq"`
	// exch: the producer's rows by key column Col; up: (Out) the sink's.
	Col string `json:"col,omitempty"`
	Out bool   `json:"out,omitempty"`
	End bool   `json:"end,omitempty"`
}

// hasUp says stage si sends its rows up: it feeds the sink.
func (t *topology) hasUp(si int) bool { return si == t.sinkIn }

// exchanges says stage si sends rows to other workers: it feeds a hash
// edge.
func (t *topology) exchanges(si int) bool { return len(t.hashOut[si]) > 0 }

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

// upData is what one worker sent up for the sink stage's input.
type upData struct {
	out []arrow.RecordBatch
}

func (u *upData) release() { releaseAll(u.out) }

// collectUp reads one stage's groups from rx until the end header of
// attempt seq; groups of other attempts are dropped.
func collectUp(ctx context.Context, rx *wire.Receiver, seq int64) (*upData, error) {
	u := &upData{}
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
			}
		}
	}
}

// inbox is a worker process's share of the hash exchanges: what each
// other worker sent it, by batch attempt, producing stage, key column and
// producer, until the attempt is dropped. A consuming stage takes its
// copy (retained); the inbox keeps its own until drop, so two stages may
// read the same exchange.
type inbox struct {
	mu      sync.Mutex
	changed chan struct{}
	groups  map[inboxKey][]arrow.RecordBatch
	ended   map[endKey]bool
	// broken is, by producer, which incarnation's link (its address)
	// ended before an end arrived, and why; a replacement's is another
	// address, so what broke with the dead one never fails its batches.
	broken map[int]brokenLink
	minSeq int64
}

type brokenLink struct {
	addr string
	err  error
}

type inboxKey struct {
	seq  int64
	from int // the producing stage
	col  string
	prod int
}

type endKey struct {
	seq        int64
	from, prod int
}

func newInbox() *inbox {
	return &inbox{changed: make(chan struct{}), groups: map[inboxKey][]arrow.RecordBatch{},
		ended: map[endKey]bool{}, broken: map[int]brokenLink{}}
}

func (in *inbox) notifyLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

// linked says a link to producer prod opened: what broke before is past.
func (in *inbox) linked(prod int) {
	in.mu.Lock()
	delete(in.broken, prod)
	in.mu.Unlock()
}

// brokeLink records that the link to producer prod at addr ended with
// err.
func (in *inbox) brokeLink(prod int, addr string, err error) {
	in.mu.Lock()
	in.broken[prod] = brokenLink{addr: addr, err: err}
	in.notifyLocked()
	in.mu.Unlock()
}

// receive reads producer prod's exchange of stage from off rx until ctx
// ends (a new link to prod replaced this one, or the worker ends) or the
// link breaks.
func (in *inbox) receive(ctx context.Context, rx *wire.Receiver, from, prod int, addr string) {
	var key *inboxKey
	for {
		it, err := rx.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				in.brokeLink(prod, addr, err)
			}
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
				if h.End {
					in.ended[endKey{h.Seq, from, prod}] = true
					in.notifyLocked()
				} else {
					key = &inboxKey{seq: h.Seq, from: from, col: h.Col, prod: prod}
				}
			}
		}
		in.mu.Unlock()
	}
}

// errPeerLink is a consuming stage that cannot have a producer's rows:
// the link to that worker broke, which its death (or a kill) explains.
type errPeerLink struct {
	peer int
	err  error
}

// peerLost is what a stage's answer says of err: the peer whose link
// broke, plus one; 0 for any other error.
func peerLost(err error) int {
	var pl errPeerLink
	if errors.As(err, &pl) {
		return pl.peer + 1
	}
	return 0
}

func (e errPeerLink) Error() string {
	return fmt.Sprintf("the link to worker %d broke before its rows arrived: %v", e.peer, e.err)
}

// take waits until every other worker has sent everything of stage from
// for attempt seq, and returns the rows by key column col, by producer
// (retained: the caller owns them; its own part is self's to add). addrs
// are the producers' addresses in this attempt: only a broken link to one
// of them fails the wait.
func (in *inbox) take(ctx context.Context, seq int64, from int, col string, self int, addrs []string) ([][]arrow.RecordBatch, error) {
	par := len(addrs)
	for {
		in.mu.Lock()
		var missing error
		all := true
		for p := range par {
			if p == self || in.ended[endKey{seq, from, p}] {
				continue
			}
			all = false
			if b, ok := in.broken[p]; ok && b.addr == addrs[p] {
				missing = errPeerLink{peer: p, err: b.err}
			}
		}
		if all {
			out := make([][]arrow.RecordBatch, par)
			for p := range par {
				for _, b := range in.groups[inboxKey{seq, from, col, p}] {
					b.Retain()
					out[p] = append(out[p], b)
				}
			}
			in.mu.Unlock()
			return out, nil
		}
		ch := in.changed
		in.mu.Unlock()
		if missing != nil {
			return nil, missing
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
