package microbatch

// The control messages between a microbatch coordinator and its worker
// processes (--workers process), after the worker's ready
// (run.SendReady), and the request/answer pairing both sides use on the
// one control stream of a connection.
//
// The coordinator asks (each request answered by the worker, in order):
//   - reset: rebuild the operators from a committed state version (and,
//     with Reopen, re-open the readers at the committed positions);
//   - avail, maxts: what the readers hold, for the planner;
//   - begin, stage: run the batch's stages one by one, the hash
//     exchanges' batches travelling on data channels (procdata.go);
//   - snapshot, encode, put: the state version, written by the worker;
//   - durable (not answered): the version is committed.
//
// The worker asks (answered by the coordinator, or by a SIGKILL when a
// fault fires for it): read, after each read of its readers, and point, at
// each crash point it passes. The coordinator counts and decides.

import (
	"context"
	"errors"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

const (
	opReset = "reset"
	// opStartReaders starts the readers a reset opened.
	opStartReaders = "start-readers"
	opAvail        = "avail"
	opMaxTS        = "maxts"
	opBegin        = "begin"
	opStage        = "stage"
	opSnapshot     = "snapshot"
	opEncode       = "encode"
	opPut          = "put"
	opDurable      = "durable"
	opRead         = "read"
	opPoint        = "point"
	// opPeerGone tells a worker that worker GonePeer-1, listening at
	// GoneAddr, died: its links to it stop waiting (wire.Mesh.Gone).
	// One-way, answered by nothing.
	opPeerGone = "peer-gone"
	// opAnswer answers the request with the same ID; Text is its error.
	opAnswer = "answer"
)

type procMsg struct {
	Op string `json:"op"`
	// ID pairs a request with its answer; 0: no answer is wanted.
	ID uint64 `json:"id,omitempty"`
	// Text is an answer's error (empty: it succeeded).
	Text string `json:"text,omitempty"`

	// reset: the committed state version, its index (the manifest's
	// chains, so the worker reads no log entry of its own) and the
	// restored batch's watermark, delivered again; with Reopen the
	// readers start again at Ends (per global partition).
	Version   int64      `json:"version,omitempty"`
	Index     stateIndex `json:"index,omitempty"`
	Watermark int64      `json:"watermark,omitempty"`
	Reopen    bool       `json:"reopen,omitempty"`
	Ends      []int64    `json:"ends,omitempty"`
	// Pace is each paced partition's schedule (by global partition), as
	// the coordinator fixed it: the reopened readers follow it, so a
	// replacement finds its backlog due.
	Pace map[int]source.Schedule `json:"pace,omitempty"`
	// Rows (answer to reset): rows of state per stateful stage, in this
	// worker's key groups.
	Rows map[string]int64 `json:"rows,omitempty"`
	// Read (answer to reset): the bytes of state the worker read from
	// storage, which the coordinator bills as the restore's.
	Read int64 `json:"read,omitempty"`

	// avail (answer): the worker's partitions.
	Avail []partAvail `json:"avail,omitempty"`
	// maxts: the batch's ranges (all partitions); answer: the greatest
	// event time in each of the worker's (NoWatermark for the others).
	Ranges []partRange `json:"ranges,omitempty"`
	MaxTS  []int64     `json:"max_ts,omitempty"`

	// begin: the batch attempt (Seq, numbering the coordinator's attempts)
	// and its logged plan.
	Seq  int64         `json:"seq,omitempty"`
	Plan *offsetsEntry `json:"plan,omitempty"`
	// begin: every worker's mesh address (run.Fleet.Peers), where the
	// hash exchanges go.
	Peers []string `json:"peers,omitempty"`
	// stage: the stage to run; answer: what it took and counted.
	Stage    int        `json:"stage,omitempty"`
	RowsIn   int64      `json:"rows_in,omitempty"`
	Late     int64      `json:"late,omitempty"`
	Handover [][2]int64 `json:"handover,omitempty"` // unix nano, rows
	Killed   bool       `json:"killed,omitempty"`   // the stage stopped as its worker died
	// Exchanged: the rows the stage took from other workers' exchanges.
	Exchanged int64 `json:"exchanged,omitempty"`
	// PeerLost: worker PeerLost-1's link broke, which failed the stage.
	PeerLost int `json:"peer_lost,omitempty"`
	// peer-gone: the dead worker (its id plus one) and its mesh address.
	GonePeer int    `json:"gone_peer,omitempty"`
	GoneAddr string `json:"gone_addr,omitempty"`

	// snapshot (answer): per stateful stage, what changed.
	Snaps []procSnap `json:"snaps,omitempty"`
	// encode: the version's batch and whether it is full (Skip: nothing
	// changed, drop the snapshots); answer: the objects and key groups.
	Batch   int64         `json:"batch,omitempty"`
	Full    bool          `json:"full,omitempty"`
	Skip    bool          `json:"skip,omitempty"`
	Encoded []procEncoded `json:"encoded,omitempty"`

	// read: N records read of global partition Part, up to Pos.
	Part int   `json:"part,omitempty"`
	N    int64 `json:"n,omitempty"`
	Pos  int64 `json:"pos,omitempty"`
	// point: the crash point passed.
	Point string `json:"point,omitempty"`

	// Traced runs. begin: Rerun, the batch runs again after a recovery
	// (its arrows are replays); reset: Reads, how far each lane had read,
	// so a replacement draws its re-read as a replay; any answer: Trace,
	// what the worker drew since its last answer.
	Rerun bool                 `json:"rerun,omitempty"`
	Reads map[string]int64     `json:"reads,omitempty"`
	Trace *spacetime.Forwarded `json:"trace,omitempty"`
}

// partAvail is what one partition's reader holds.
type partAvail struct {
	Part int    `json:"part"`
	Pos  int64  `json:"pos"`
	EOF  bool   `json:"eof,omitempty"`
	Err  string `json:"err,omitempty"`
}

// procSnap is one stage's snapshot on one worker, as commitState needs it.
type procSnap struct {
	Stage       int   `json:"stage"`
	Rows        int64 `json:"rows"`
	Bytes       int64 `json:"bytes"`
	ChangedRows int64 `json:"changed_rows"`
	Changed     bool  `json:"changed,omitempty"`
	Deleted     []int `json:"deleted,omitempty"`
}

// procEncoded is one stage's object of a state version, written by the
// worker that holds the stage's key groups (empty Name: nothing to write).
type procEncoded struct {
	Stage  int    `json:"stage"`
	Name   string `json:"name,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
	Whole  []int  `json:"whole,omitempty"`
	Edited []int  `json:"edited,omitempty"`
}

func sendMsg(c *wire.Conn, m procMsg) error { return wire.SendJSON(c, m) }

// answer is the answer to request m: failed with err, or succeeded.
func answer(m procMsg, reply procMsg, err error) procMsg {
	reply.Op, reply.ID = opAnswer, m.ID
	if err != nil {
		reply.Text = err.Error()
	}
	return reply
}

// rpcPeer pairs the requests one side sends with the answers that come
// back on the connection's control stream; the side's read loop hands
// every answer to delivered.
type rpcPeer struct {
	c       *wire.Conn
	pending wire.Pending[procMsg]
}

func newRPCPeer(c *wire.Conn) *rpcPeer { return &rpcPeer{c: c} }

// errPeerGone is a request that found its peer's connection closed.
var errPeerGone = errors.New("the connection closed")

// call sends m and waits for its answer. An answer with Text is returned
// with that error.
func (p *rpcPeer) call(ctx context.Context, m procMsg) (procMsg, error) {
	id, ch := p.pending.Add()
	defer p.pending.Forget(id)
	m.ID = id
	if err := sendMsg(p.c, m); err != nil {
		return procMsg{}, fmt.Errorf("%s: %w: %w", m.Op, errPeerGone, err)
	}
	select {
	case a := <-ch:
		if a.Text != "" {
			return a, errors.New(a.Text)
		}
		return a, nil
	case <-p.c.Done():
		return procMsg{}, fmt.Errorf("%s: %w: %w", m.Op, errPeerGone, p.c.Err())
	case <-ctx.Done():
		return procMsg{}, ctx.Err()
	}
}

// delivered hands an answer to its caller; an answer nobody waits for
// (its caller gave up) is dropped.
func (p *rpcPeer) delivered(a procMsg) { p.pending.Deliver(a.ID, a) }

func decodeMsg(b []byte) (procMsg, error) { return wire.DecodeJSON[procMsg](b) }
