package checkpoint

import (
	"fmt"
	"time"
)

// ID identifies a checkpoint. IDs start at 1 and strictly increase, also
// across coordinator restarts (see RestorePlan.NextID), so a new checkpoint
// never reuses a storage location that may still hold another's parts.
type ID uint64

// TaskID names one task (an operator subtask, a source or a sink) that must
// acknowledge every checkpoint. The coordinator treats it as opaque.
type TaskID string

// Part describes what one task saved for one checkpoint.
type Part struct {
	// Key says where the part lives in durable shared storage. It is opaque
	// to the coordinator and copied into WriteMetadata.
	Key string
	// StateBytes is the size of the saved operator state (and, for sources,
	// the recorded read positions).
	StateBytes int64
	// InFlightBytes and InFlightRecords measure the channel state persisted
	// with the part: records that were in flight when the task took an
	// unaligned snapshot. Zero for aligned snapshots.
	InFlightBytes   int64
	InFlightRecords int64
	// Durable reports that the part is already in durable shared storage.
	// A task may acknowledge early with Durable false (snapshot taken,
	// upload still running) and again with Durable true; until every part is
	// durable the metadata is not written.
	Durable bool
}

// TaskPart is one task's part, as listed in WriteMetadata.
type TaskPart struct {
	Task TaskID
	Part Part
}

// Action is an instruction for the I/O loop. The concrete types are
// InjectBarrier, ScheduleTimeout, WriteMetadata, NotifyComplete, Abort,
// DiscardParts, DeleteOld, TriggerSkipped and Fail; the set is closed (the
// marker method is unexported). Actions returned by one Step must be
// carried out in the order given.
type Action interface {
	isAction()
	String() string
}

// InjectBarrier asks every source to start checkpoint ID: record its read
// position in its part and emit the barrier right after the last record it
// has emitted, so the position names exactly the prefix ahead of the barrier.
type InjectBarrier struct {
	ID ID
	At time.Time // the trigger time passed to Trigger
}

// ScheduleTimeout asks the loop to step a Timeout for ID after After.
// The loop need not cancel it: a timeout for a finished checkpoint is ignored.
type ScheduleTimeout struct {
	ID    ID
	After time.Duration
}

// WriteMetadata asks the loop to write the metadata object of checkpoint ID,
// tying the parts together, atomically, and then to call MetadataWritten (or
// MetadataFailed). It is issued only once every expected task has
// acknowledged and every part is durable: the metadata object is what makes
// the checkpoint a recovery point, so it must never refer to a part that
// could still be lost.
type WriteMetadata struct {
	ID    ID
	Parts []TaskPart // in Config.Tasks order
}

// NotifyComplete tells every task that checkpoint ID is complete: a
// transactional sink may now publish the output this checkpoint covers.
// Stats carries the checkpoint's metrics (trigger time, per-task acks,
// sizes, completion time).
type NotifyComplete struct {
	ID    ID
	Stats Stats
}

// Abort tells every task that checkpoint ID will never complete, so they
// can drop whatever they still hold for it. It is always followed by
// DiscardParts for the same ID.
type Abort struct {
	ID     ID
	Reason Reason
	// Task is the task that declined or failed, when Reason names one.
	Task TaskID
	// Detail is the decline reason or metadata error text, if any.
	Detail string
	Stats  Stats
}

// DiscardParts asks the loop to delete everything stored for checkpoint ID.
// Delete the metadata object first, if one exists (a metadata write that
// reported failure may still have landed), then the parts: in that order a
// crash half-way leaves parts without metadata, which Restore discards, and
// never metadata pointing at missing parts. A task still writing a part
// after this may leave an orphan; the next Restore finds and discards it.
type DiscardParts struct {
	ID ID
}

// DeleteOld asks the loop to delete completed checkpoints that fall outside
// the retained count, oldest first. As with DiscardParts, delete each one's
// metadata before its parts.
type DeleteOld struct {
	IDs []ID
}

// TriggerSkipped reports a Trigger that started nothing because the maximum
// number of checkpoints was already pending (skip-while-pending).
type TriggerSkipped struct {
	At      time.Time
	Pending []ID
}

// Fail reports an input the coordinator cannot take; it can only be a bug
// in the loop, which stops with Err. The coordinator is left as it was.
type Fail struct {
	Err error
}

func (InjectBarrier) isAction()   {}
func (ScheduleTimeout) isAction() {}
func (WriteMetadata) isAction()   {}
func (NotifyComplete) isAction()  {}
func (Abort) isAction()           {}
func (DiscardParts) isAction()    {}
func (DeleteOld) isAction()       {}
func (TriggerSkipped) isAction()  {}
func (Fail) isAction()            {}

// Reason says why a checkpoint was abandoned.
type Reason uint8

// The reasons a checkpoint is abandoned. Declined, TimedOut, TaskFailure and
// MetadataFailure are failures (Counts.Failed); Subsumed and Stopped are
// deliberate (Counts.Aborted).
const (
	// Declined: a task refused the checkpoint (Decline).
	Declined Reason = iota + 1
	// TimedOut: not every task acknowledged with a durable part in time.
	TimedOut
	// TaskFailure: a task failed while the checkpoint was collecting acks.
	TaskFailure
	// MetadataFailure: the loop could not write the metadata object.
	MetadataFailure
	// Subsumed: a newer checkpoint completed first (only with
	// MaxConcurrent > 1); the older one has nothing left to offer.
	Subsumed
	// Stopped: the coordinator was stopped with the checkpoint pending.
	Stopped
)

// Failure reports whether the reason counts as a failure rather than a
// deliberate abort.
func (r Reason) Failure() bool {
	switch r {
	case Declined, TimedOut, TaskFailure, MetadataFailure:
		return true
	}
	return false
}

// String implements fmt.Stringer.
func (r Reason) String() string {
	switch r {
	case Declined:
		return "declined"
	case TimedOut:
		return "timed out"
	case TaskFailure:
		return "task failed"
	case MetadataFailure:
		return "metadata write failed"
	case Subsumed:
		return "subsumed"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

func (a InjectBarrier) String() string {
	return fmt.Sprintf("inject-barrier cp=%d at=%s", a.ID, clock(a.At))
}

func (a ScheduleTimeout) String() string {
	return fmt.Sprintf("schedule-timeout cp=%d after=%v", a.ID, a.After)
}

func (a WriteMetadata) String() string {
	s := fmt.Sprintf("write-metadata cp=%d", a.ID)
	for _, p := range a.Parts {
		s += fmt.Sprintf(" %s=%s", p.Task, p.Part.Key)
	}
	return s
}

func (a NotifyComplete) String() string {
	return fmt.Sprintf("notify-complete cp=%d %v", a.ID, a.Stats)
}

func (a Abort) String() string {
	s := fmt.Sprintf("abort cp=%d reason=%q", a.ID, a.Reason.String())
	if a.Task != "" {
		s += fmt.Sprintf(" task=%s", a.Task)
	}
	if a.Detail != "" {
		s += fmt.Sprintf(" detail=%q", a.Detail)
	}
	return s + " " + a.Stats.String()
}

func (a DiscardParts) String() string { return fmt.Sprintf("discard-parts cp=%d", a.ID) }

func (a DeleteOld) String() string { return fmt.Sprintf("delete-old cps=%v", a.IDs) }

func (a TriggerSkipped) String() string {
	return fmt.Sprintf("trigger-skipped at=%s pending=%v", clock(a.At), a.Pending)
}

func (a Fail) String() string { return fmt.Sprintf("fail: %v", a.Err) }
