package checkpoint

import (
	"fmt"
	"time"
)

// Input is one event the I/O loop hands to Coordinator.Step. The concrete
// types are Trigger, Ack, PartsWritten, MetadataWritten, MetadataFailed,
// Decline, Timeout, TaskFailed and Stop; the set is closed (the marker
// method is unexported). Each carries Now, the loop's clock at the event:
// the coordinator reads no clock of its own.
//
// Inputs about a checkpoint that is unknown, finished or past the stage
// they concern, or from a task not in Config.Tasks, are ignored (no
// actions): the loop may still be delivering acks and timers sent before
// an abort, so they are expected, not errors.
type Input interface {
	isInput()
	String() string
}

// Trigger starts the next checkpoint, unless Config.MaxConcurrent
// checkpoints are already pending: then it is skipped (TriggerSkipped,
// Counts.Skipped) rather than queued or subsuming the pending one.
// Skipping is Flink's default and keeps the pending checkpoint alive:
// subsuming it would, under steady backpressure, abort every checkpoint
// before it could finish. After Stop, Trigger does nothing.
type Trigger struct {
	Now time.Time
}

// Ack records that Task saved its part of checkpoint ID. Once every task
// has acknowledged and every part is durable the result is WriteMetadata.
// An ack repeating an already durable part is ignored.
type Ack struct {
	Now  time.Time
	ID   ID
	Task TaskID
	Part Part
}

// PartsWritten is the loop's confirmation that every part acknowledged so
// far for checkpoint ID is durable, for parts the tasks reported with
// Durable false (for instance because the loop uploads them itself). Parts
// acknowledged after it need their own confirmation.
type PartsWritten struct {
	Now time.Time
	ID  ID
}

// MetadataWritten is the loop's confirmation that the metadata object of
// checkpoint ID is durable: the checkpoint is complete. The result is
// NotifyComplete and, beyond the retained count, DeleteOld. Older
// checkpoints still collecting are subsumed (only possible with
// MaxConcurrent > 1). A confirmation arriving after a newer checkpoint
// already completed subsumes this one instead, so completed IDs only grow.
type MetadataWritten struct {
	Now time.Time
	ID  ID
}

// MetadataFailed reports that writing the metadata of checkpoint ID failed;
// the checkpoint is abandoned (its DiscardParts also removes the metadata
// object in case the write landed after all).
type MetadataFailed struct {
	Now time.Time
	ID  ID
	Err error
}

// Decline abandons checkpoint ID because Task refused it (for instance the
// task aborted it on a newer barrier, or could not write its part).
// Ignored once the checkpoint is no longer collecting acks.
type Decline struct {
	Now    time.Time
	ID     ID
	Task   TaskID
	Reason string
}

// Timeout abandons checkpoint ID if it is still collecting acks. A timeout
// during the metadata write is ignored: the write may still land, and
// discarding the parts under it would leave metadata naming missing parts.
type Timeout struct {
	Now time.Time
	ID  ID
}

// TaskFailed abandons every checkpoint still collecting acks: a failed
// task lost its memory, so it will never deliver its part. Checkpoints
// already writing metadata have all their parts and are left to finish.
// Starting new checkpoints only once the task is back is the loop's
// business.
type TaskFailed struct {
	Now  time.Time
	Task TaskID
}

// Stop abandons every checkpoint still collecting acks and makes later
// Triggers do nothing. A checkpoint writing metadata is left to finish; the
// loop should wait for its confirmation before exiting.
type Stop struct {
	Now time.Time
}

func (Trigger) isInput()         {}
func (Ack) isInput()             {}
func (PartsWritten) isInput()    {}
func (MetadataWritten) isInput() {}
func (MetadataFailed) isInput()  {}
func (Decline) isInput()         {}
func (Timeout) isInput()         {}
func (TaskFailed) isInput()      {}
func (Stop) isInput()            {}

// clock prints an input's time in one short field: inputs of one run are
// close together, so the date only adds noise to a trace.
func clock(t time.Time) string { return t.Format("15:04:05.000") }

func (in Trigger) String() string { return fmt.Sprintf("trigger at=%s", clock(in.Now)) }

func (in Ack) String() string {
	return fmt.Sprintf("ack at=%s cp=%d task=%s %v", clock(in.Now), in.ID, in.Task, in.Part)
}

func (in PartsWritten) String() string {
	return fmt.Sprintf("parts-written at=%s cp=%d", clock(in.Now), in.ID)
}

func (in MetadataWritten) String() string {
	return fmt.Sprintf("metadata-written at=%s cp=%d", clock(in.Now), in.ID)
}

func (in MetadataFailed) String() string {
	return fmt.Sprintf("metadata-failed at=%s cp=%d err=%q", clock(in.Now), in.ID, errText(in.Err))
}

func (in Decline) String() string {
	return fmt.Sprintf("decline at=%s cp=%d task=%s reason=%q", clock(in.Now), in.ID, in.Task, in.Reason)
}

func (in Timeout) String() string { return fmt.Sprintf("timeout at=%s cp=%d", clock(in.Now), in.ID) }

func (in TaskFailed) String() string {
	return fmt.Sprintf("task-failed at=%s task=%s", clock(in.Now), in.Task)
}

func (in Stop) String() string { return fmt.Sprintf("stop at=%s", clock(in.Now)) }

// String prints a part in one line: key, sizes and whether it is durable.
func (p Part) String() string {
	s := fmt.Sprintf("part(key=%s state=%dB", p.Key, p.StateBytes)
	if p.InFlightRecords > 0 || p.InFlightBytes > 0 {
		s += fmt.Sprintf(" in-flight=%d/%dB", p.InFlightRecords, p.InFlightBytes)
	}
	if p.Durable {
		s += " durable"
	}
	return s + ")"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
