package diskphase

import (
	"errors"
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// The control messages between a coordinator and a worker process with
// --workers process. The coordinator sends run (one unit attempt) and
// cancel (its coordinator is gone), and answers every read and point with
// go or fail, unless it kills the worker instead. The worker first says
// ready (or failed, with the reason: run.SendReady), then sends read
// (records handed over, so the coordinator counts them and decides the
// faults), point (a named crash point reached) and done (the ledger entry,
// or the error).
const (
	opRun    = "run"
	opCancel = "cancel"
	opGo     = "go"
	opFail   = "fail"
	opRead   = "read"
	opPoint  = "point"
	opDone   = "done"
)

type procMsg struct {
	Op string `json:"op"`

	// run
	Unit    UnitID      `json:"unit"`
	Attempt int         `json:"attempt,omitempty"`
	Worker  int         `json:"worker,omitempty"`
	Rerun   bool        `json:"rerun,omitempty"`
	Map     *mapTask    `json:"map,omitempty"`
	Reduce  *reduceTask `json:"reduce,omitempty"`
	// Pace is a paced map input's schedule as the coordinator fixed it,
	// so the worker process reads on the run's schedule, not its own.
	Pace *source.Schedule `json:"pace,omitempty"`

	// read: N records, and the hand-over stamps of the records read since
	// the last read message.
	N      int64       `json:"n,omitempty"`
	Stamps []procStamp `json:"stamps,omitempty"`
	// point: the named crash point reached.
	Point string `json:"point,omitempty"`
	// fail: the text of the error the point returns.
	Text string `json:"text,omitempty"`

	// done: the whole ledger entry as the worker built it (every field,
	// whatever the entry types grow), or Err.
	MapEntry    *MapEntry    `json:"map_entry,omitempty"`
	ReduceEntry *ReduceEntry `json:"reduce_entry,omitempty"`
	Err         *procErr     `json:"err,omitempty"`
	// Counts (done, and every read and point): what the attempt has
	// materialised so far, so a killed attempt's share is not lost with it.
	Counts map[int]procCounts `json:"counts,omitempty"`
}

// procStamp is a handoverLog stamp on the wire (wall clock: both
// processes run on one machine's clock).
type procStamp struct {
	Split    int   `json:"split"`
	From     int64 `json:"from"`
	To       int64 `json:"to"`
	UnixNano int64 `json:"t"`
}

// procCounts are what an attempt adds to one finite job's metrics in the
// worker process, handed to the coordinator's metrics with the result.
type procCounts struct {
	Bytes      int64 `json:"bytes,omitempty"`
	Files      int64 `json:"files,omitempty"`
	RowsReread int64 `json:"rows_reread,omitempty"`
}

// procErr is an attempt's error on the wire: a damaged input file keeps
// its kind, which the coordinator acts on (a re-run of its producer).
type procErr struct {
	Text    string  `json:"text"`
	BadFile *badRef `json:"bad_file,omitempty"`
}

type badRef struct {
	Producer UnitID `json:"producer"`
	File     string `json:"file"`
	Reason   string `json:"reason"`
}

func toProcErr(err error) *procErr {
	if err == nil {
		return nil
	}
	pe := &procErr{Text: err.Error()}
	var bad *fileBadError
	if errors.As(err, &bad) {
		pe.BadFile = &badRef{Producer: bad.producer, File: bad.file, Reason: bad.reason}
	}
	return pe
}

// remoteError is an attempt's error as the worker process reported it.
type remoteError struct {
	worker int
	text   string
}

func (e *remoteError) Error() string { return fmt.Sprintf("worker process %d: %s", e.worker, e.text) }

func (pe *procErr) err(worker int) error {
	if pe.BadFile != nil {
		return &fileBadError{producer: pe.BadFile.Producer, file: pe.BadFile.File, reason: pe.BadFile.Reason}
	}
	return &remoteError{worker: worker, text: pe.Text}
}

// workerDiedError is an attempt whose worker process died: its connection
// broke. killed is when the coordinator sent SIGKILL (zero: it died on its
// own), detected when the broken connection was seen.
type workerDiedError struct {
	worker           int
	reason           error
	killed, detected time.Time
}

func (e *workerDiedError) Error() string {
	return fmt.Sprintf("worker %d's process is lost (%v)", e.worker, e.reason)
}

// procConfig is a worker process's whole configuration, in the Welcome:
// what it needs to run any unit of the run against the same durable
// storage and inputs.
type procConfig struct {
	run.WorkerRun
	Plan        RunPlan     `json:"plan"`
	Compression Compression `json:"compression"`
	ReadBatch   int         `json:"read_batch"`
	// ChunkRows is the coordinator's chunk budget (never 0 there): a
	// worker without it wrote a file every few rows.
	ChunkRows int `json:"chunk_rows"`
}

// send sends m on c.
func send(c interface{ SendControl([]byte) error }, m procMsg) error { return wire.SendJSON(c, m) }

func decodeMsg(b []byte) (procMsg, error) { return wire.DecodeJSON[procMsg](b) }
