package recordwise

import (
	"slices"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Named crash points (rewind run --executor recordwise --list-fail-points).
//
// A point reached by a task kills the task's worker: every task of that
// worker stops where it is, its operators, channel buffers, prefetched input
// and unflushed sink rows are dropped, and after --detect-delay the whole job
// is restarted from the newest complete recovery point. A point reached by
// the coordinator kills the coordinator, with the same consequence. The
// occurrence K of --fail point=NAME,occurrence=K counts every time any task
// (or the coordinator) reaches NAME, across restarts.
const (
	// PointAfterTrigger: the coordinator asked every source to inject the
	// barrier of a new checkpoint (coordinator).
	PointAfterTrigger = "checkpoint.after-trigger"
	// PointDuringAlignment: an operator subtask has received the barrier on
	// some input channels and is waiting for the rest (aligned only; task).
	PointDuringAlignment = "checkpoint.during-alignment"
	// PointAfterSnapshot: a task took its synchronous snapshot and forwarded
	// the barrier; nothing of its part is durable yet (task).
	PointAfterSnapshot = "checkpoint.after-snapshot"
	// PointMidPartWrite: a task's part is being written: its first object
	// is durable, the rest (channel state, part descriptor) is not (task).
	PointMidPartWrite = "checkpoint.mid-part-write"
	// PointBeforeAck: a task's part is durable, the acknowledgement has not
	// reached the coordinator (task).
	PointBeforeAck = "checkpoint.before-ack"
	// PointAfterPartsBeforeMetadata: every part is durable and acknowledged;
	// the coordinator is about to write the metadata (coordinator). The
	// restart must use the previous recovery point.
	PointAfterPartsBeforeMetadata = "checkpoint.after-parts-before-metadata"
	// PointMidMetadata: the metadata object is encoded and being written.
	// Put is atomic, so the crash leaves no metadata object (coordinator).
	PointMidMetadata = "checkpoint.mid-metadata"
	// PointAfterMetadata: the metadata is durable, so the checkpoint is a
	// recovery point, but nobody has been told (coordinator).
	PointAfterMetadata = "checkpoint.after-metadata"
	// PointSinkBeforePrecommit: a sink subtask received barrier n and has
	// not flushed epoch n yet (task).
	PointSinkBeforePrecommit = "sink.before-precommit"
	// PointSinkAfterPrecommit: a sink subtask flushed epoch n (transactional:
	// staged, invisible; append: visible; idempotent: upserted) (task).
	PointSinkAfterPrecommit = "sink.after-precommit"
	// PointSinkBeforeCommit: checkpoint n is complete and the sink has not
	// published epoch n (coordinator).
	PointSinkBeforeCommit = "sink.before-commit"
	// PointSinkAfterCommit: the sink published epochs <= n (coordinator).
	PointSinkAfterCommit = "sink.after-commit"
	// PointMidRestore: a restarted job has chosen its recovery point and
	// read part of it (coordinator). Recovery itself is interrupted.
	PointMidRestore = "recovery.mid-restore"
)

// failPoints is the list FailPoints returns, in protocol order.
var failPoints = []string{
	PointAfterTrigger,
	PointDuringAlignment,
	PointAfterSnapshot,
	PointMidPartWrite,
	PointBeforeAck,
	PointAfterPartsBeforeMetadata,
	PointMidMetadata,
	PointAfterMetadata,
	PointSinkBeforePrecommit,
	PointSinkAfterPrecommit,
	PointSinkBeforeCommit,
	PointSinkAfterCommit,
	PointMidRestore,
}

// taskPoints are the points tasks reach. The faults are the
// coordinator's, so a task in a worker process asks it at a point
// (procpoints.go); it asks only at the points some fault of the run
// names (askedPoints), since a round trip per record batch would cost
// every run what only a fault needs.
var taskPoints = []string{PointDuringAlignment, PointAfterSnapshot, PointMidPartWrite, PointBeforeAck,
	PointSinkBeforePrecommit, PointSinkAfterPrecommit}

// askedPoints are the task points specs name: at one, or held back
// until one.
func askedPoints(specs []fault.Spec) []string {
	var out []string
	for _, s := range specs {
		for _, p := range []string{s.Point, s.AtPoint, s.AfterPoint} {
			if slices.Contains(taskPoints, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// reach passes the named point as worker (fault.Coordinator for the
// coordinator; where names the task, "" for the coordinator). A worker
// kill that fires there for another worker than the caller's (at-point at
// a coordinator point, or after-point once its records are read) is
// carried out here, as one noticed at a read is, and the caller goes on:
// reach returns nil. Anything else is returned for the caller to fail
// with, as before.
func (inc *incarnation) reach(name string, worker int, where checkpoint.TaskID) error {
	if inc.side != nil { // a worker process: the coordinator decides
		return inc.side.points.ask(inc.ctx, inc.attempt, name, worker, where)
	}
	err := inc.env.Faults.Point(name, worker)
	if cr, ok := fault.AsCrash(err); ok && cr.Worker != worker {
		inc.crash(cr, where)
		return nil
	}
	return err
}
