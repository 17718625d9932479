package recordwise

// This file holds the control messages between a recordwise coordinator
// and its worker processes (--workers process). Each is one JSON object
// on the connection's control channel; op says what it is.
//
// Coordinator to worker: start an attempt (what to restore), a task's
// control message (trigger, abort, end, final), stop the attempt, and the
// answer to a sink flush. Worker to coordinator: the attempt started, a
// task's event for the checkpoint coordinator (ack, decline, source
// finished, task ended), rows a transactional sink holds for a commit, a
// measurement, a sink writer opened, a task's failure, and the attempt
// stopped.

import (
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

const (
	opStart   = "start"
	opCtrl    = "ctrl"
	opStop    = "stop"
	opFlushed = "flushed"

	opStarted = "started"
	opEvent   = "event"
	opHold    = "hold"
	opObs     = "obs"
	opWriter  = "writer"
	opFailed  = "failed"
	opStopped = "stopped"
	opError   = "error"
	opTrace   = "trace"
	// A task at a named point asks (point, ID numbering the worker's
	// questions), the coordinator answers (point-answer).
	opPoint       = "point"
	opPointAnswer = "point-answer"
	// A worker's direct link to another (Subtask: its id, Text: its
	// address) broke while the attempt ran.
	opPeerLost = "peer-lost"
)

type procMsg struct {
	Op      string `json:"op"`
	Text    string `json:"text,omitempty"`
	Attempt int    `json:"attempt"`
	Task    string `json:"task,omitempty"`
	// A task's control message (ctrl).
	Ctrl ctrlKind `json:"ctrl,omitempty"`
	ID   uint64   `json:"id,omitempty"`
	At   int64    `json:"at,omitempty"`
	// What an attempt starts from (start).
	Start *procStart `json:"start,omitempty"`
	// A task's event (event), held rows (hold), a measurement (obs).
	Event *procEvent `json:"event,omitempty"`
	Rows  [][2]int64 `json:"rows,omitempty"`
	Obs   *obsMsg    `json:"obs,omitempty"`
	// A sink writer's data channel and subtask (writer), and a flush's
	// epoch (flushed; Text is its error).
	Channel uint32 `json:"channel,omitempty"`
	Subtask int    `json:"subtask,omitempty"`
	Epoch   int64  `json:"epoch,omitempty"`
	// What the worker drew since it last sent (trace).
	Trace *spacetime.Forwarded `json:"trace,omitempty"`
	// A point's answer: the asking worker is being killed there.
	Killed bool `json:"killed,omitempty"`
	// The rows a stopped attempt received over direct links (stopped).
	Linked int64 `json:"linked,omitempty"`
	// Why a direct link broke (peer-lost).
	Why string `json:"why,omitempty"`
}

// procStart is what an attempt's tasks are built from besides durable
// storage and the inputs: the recovery point the coordinator chose
// (0: none), the first sink epoch, and the replays the sink tasks drop
// (reconcilePublished).
type procStart struct {
	From       uint64      `json:"from"`
	FirstEpoch int64       `json:"first_epoch"`
	Replayed   []epochSpan `json:"replayed,omitempty"`
	Published  [][]int64   `json:"published,omitempty"`
	// Pace is each paced partition's schedule (input/partition), fixed by
	// the coordinator where its own reader would open: every worker, a
	// replacement too, reads on the run's one schedule and finds the
	// backlog due.
	Pace map[string]source.Schedule `json:"pace,omitempty"`
	// Reads are, when the run is traced, how far each lane had read
	// (spacetime.Recorder.Reads), so a re-read is drawn as a replay in a
	// replacement process too.
	Reads map[string]int64 `json:"reads,omitempty"`
	// Peers are every worker's mesh address (run.Fleet.Peers): a link
	// between two workers goes straight from one to the other.
	Peers []string `json:"peers"`
}

// procEvent is a coordEvent on the wire.
type procEvent struct {
	Kind   coordEventKind      `json:"kind"`
	ID     uint64              `json:"id"`
	Task   string              `json:"task"`
	Part   checkpoint.Part     `json:"part"`
	Stats  TaskCheckpointStats `json:"stats"`
	Reason string              `json:"reason,omitempty"`
}

func toProcEvent(e coordEvent) *procEvent {
	return &procEvent{Kind: e.kind, ID: uint64(e.id), Task: string(e.task), Part: e.part, Stats: e.m, Reason: e.reason}
}

func (e *procEvent) coordEvent() coordEvent {
	return coordEvent{kind: e.Kind, id: checkpoint.ID(e.ID), task: checkpoint.TaskID(e.Task), part: e.Part, m: e.Stats, reason: e.Reason}
}

func sendMsg(c *wire.Conn, m procMsg) error { return wire.SendJSON(c, m) }

func decodeMsg(b []byte) (procMsg, error) { return wire.DecodeJSON[procMsg](b) }

// The wire data channels of an attempt: a link's is its id under the
// attempt, a sink writer's in the upper half. Ids are never reused on a
// connection, since a closed receiver keeps its channel.
func linkChannel(attempt int, l link) uint32 {
	return uint32(attempt&0x7fff)<<16 | l.id&0xffff
}

func sinkChannel(attempt int, n uint32) uint32 {
	return 1<<31 | uint32(attempt&0x7fff)<<16 | n&0xffff
}
