package barrier

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Action is an instruction from the Handler to the I/O loop. Carry out the
// actions of one call in the order given: in particular nothing may be
// processed between a Snapshot and the ForwardBarrier next to it, and the
// Process actions of replayed records come after the UnblockChannel
// actions and must run in order.
//
// The concrete types are Process, Buffered, BlockChannel, UnblockChannel,
// AlignmentStarted, Snapshot, ForwardBarrier, PersistChannelState,
// StartTimer, CancelTimer, PartComplete, AbortCheckpoint, InputEnded and
// Fail; the set is closed (the marker method is unexported).
type Action interface {
	isAction()
	String() string
}

// Process tells the loop to run the operator on the record now. Replayed
// marks a record the handler had buffered from a blocked channel and now
// releases, in its original arrival order.
//
// Unlike the other actions it comes as a pointer, *Process[T], into a
// buffer the handler reuses (valid until the next Step like the slice):
// boxing a value this size in an Action would allocate once per record.
type Process[T any] struct {
	Channel  Channel
	Item     Item[T]
	Replayed bool
}

// Buffered reports that a record arriving on a blocked channel was queued
// inside the handler instead of processed. A loop that stops reading a
// channel on BlockChannel never sees it; one that keeps reading does, and
// loses nothing.
type Buffered struct {
	Checkpoint checkpoint.ID
	Channel    Channel
	Records    int
	Bytes      int64
}

// BlockChannel reports that channel delivered barrier Checkpoint during an
// aligned checkpoint: what follows on it must wait until alignment ends.
// The loop should stop reading it (backpressure) until UnblockChannel.
type BlockChannel struct {
	Checkpoint checkpoint.ID
	Channel    Channel
}

// UnblockChannel ends a BlockChannel: the loop may read the channel again.
type UnblockChannel struct {
	Channel Channel
}

// AlignmentStarted reports the first barrier of a checkpoint. The loop
// stamps its clock here; alignment duration is the time from this action to
// the checkpoint's PartComplete.
type AlignmentStarted struct {
	Checkpoint   checkpoint.ID
	FirstChannel Channel
}

// Snapshot tells the loop to snapshot the operator's state now. At this
// point the state reflects exactly the records processed so far. In an
// unaligned snapshot the records the state misses are delivered afterwards
// as PersistChannelState for the same checkpoint.
type Snapshot struct {
	Checkpoint checkpoint.ID
	Unaligned  bool
	// TimedOut marks an aligned checkpoint switched to unaligned because
	// its alignment timer fired.
	TimedOut bool
}

// ForwardBarrier tells the loop to emit barrier Checkpoint on every output
// channel. Overtaking (unaligned) means: put it ahead of the output still
// queued in the output buffers, and persist those overtaken output records
// as output channel state of this checkpoint, since downstream will receive
// them after the barrier.
type ForwardBarrier struct {
	Checkpoint checkpoint.ID
	Overtaking bool
}

// PersistChannelState tells the loop to persist the record as input channel
// state of checkpoint Checkpoint on Channel: it precedes the barrier on that
// channel but arrived after the snapshot, so the snapshot misses it. The
// record is also processed (the Process action that follows). On restore,
// channel state is fed to the operator before any new input.
type PersistChannelState[T any] struct {
	Checkpoint checkpoint.ID
	Channel    Channel
	Item       Item[T]
}

// StartTimer asks the loop to call Handler.TimerFired(Checkpoint) after
// After. Only AlignedWithTimeout emits it.
type StartTimer struct {
	Checkpoint checkpoint.ID
	After      time.Duration
}

// CancelTimer tells the loop the timer of Checkpoint is no longer needed.
// A timer that fires anyway is ignored.
type CancelTimer struct {
	Checkpoint checkpoint.ID
}

// PartComplete reports that this subtask's part of checkpoint Checkpoint is
// whole: the snapshot is taken and, for an unaligned checkpoint, barrier
// Checkpoint has arrived on every channel so its channel state is complete.
// The loop finishes writing the part and acknowledges to the coordinator.
// The fields are the alignment metrics.
type PartComplete struct {
	Checkpoint   checkpoint.ID
	FirstChannel Channel // the channel whose barrier arrived first
	Unaligned    bool    // the snapshot was taken unaligned
	TimedOut     bool    // switched from aligned to unaligned on the timer
	// Records and bytes held back from blocked channels during alignment.
	BufferedRecords int
	BufferedBytes   int64
	// Records and bytes persisted as input channel state.
	PersistedRecords int
	PersistedBytes   int64
}

// AbortCheckpoint reports that this subtask gave checkpoint Checkpoint up.
// The loop declines it to the coordinator, drops any snapshot or channel
// state written for it, and sends a cancel marker downstream so that later
// subtasks do not wait for a barrier that will not come.
type AbortCheckpoint struct {
	Checkpoint checkpoint.ID
	Reason     AbortReason
	// SnapshotTaken reports that Snapshot (and possibly channel state) was
	// already issued for it.
	SnapshotTaken bool
}

// InputEnded reports that every input channel has ended.
type InputEnded struct{}

// Fail reports an input the handler cannot take: a channel out of range,
// input on a channel after its end, or an input of another item type. It
// can only be a bug in the loop, so the loop stops the subtask with Err.
// The handler's state is as it was before the input.
type Fail struct {
	Err error
}

func (*Process[T]) isAction()            {}
func (Buffered) isAction()               {}
func (BlockChannel) isAction()           {}
func (UnblockChannel) isAction()         {}
func (AlignmentStarted) isAction()       {}
func (Snapshot) isAction()               {}
func (ForwardBarrier) isAction()         {}
func (PersistChannelState[T]) isAction() {}
func (StartTimer) isAction()             {}
func (CancelTimer) isAction()            {}
func (PartComplete) isAction()           {}
func (AbortCheckpoint) isAction()        {}
func (InputEnded) isAction()             {}
func (Fail) isAction()                   {}

// AbortReason says why a subtask gave a checkpoint up.
type AbortReason uint8

// The reasons a subtask aborts a checkpoint.
const (
	// Subsumed: a barrier of a newer checkpoint arrived on a channel that
	// had not delivered this one's, so this one cannot complete here.
	Subsumed AbortReason = iota + 1
	// Canceled: Handler.Cancel was called for it (or for a newer one).
	Canceled
)

// String implements fmt.Stringer.
func (r AbortReason) String() string {
	switch r {
	case Subsumed:
		return "subsumed"
	case Canceled:
		return "canceled"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

func (a *Process[T]) String() string {
	s := fmt.Sprintf("process ch=%d value=%v", a.Channel, a.Item.Value)
	if a.Replayed {
		s += " replayed"
	}
	return s
}

func (a Buffered) String() string {
	return fmt.Sprintf("buffered cp=%d ch=%d records=%d bytes=%d", a.Checkpoint, a.Channel, a.Records, a.Bytes)
}

func (a BlockChannel) String() string {
	return fmt.Sprintf("block cp=%d ch=%d", a.Checkpoint, a.Channel)
}

func (a UnblockChannel) String() string { return fmt.Sprintf("unblock ch=%d", a.Channel) }

func (a AlignmentStarted) String() string {
	return fmt.Sprintf("alignment-started cp=%d first-ch=%d", a.Checkpoint, a.FirstChannel)
}

func (a Snapshot) String() string {
	return fmt.Sprintf("snapshot cp=%d", a.Checkpoint) + flag(a.Unaligned, " unaligned") + flag(a.TimedOut, " timed-out")
}

func (a ForwardBarrier) String() string {
	return fmt.Sprintf("forward-barrier cp=%d", a.Checkpoint) + flag(a.Overtaking, " overtaking")
}

func (a PersistChannelState[T]) String() string {
	return fmt.Sprintf("persist cp=%d ch=%d value=%v", a.Checkpoint, a.Channel, a.Item.Value)
}

func (a StartTimer) String() string {
	return fmt.Sprintf("start-timer cp=%d after=%v", a.Checkpoint, a.After)
}

func (a CancelTimer) String() string { return fmt.Sprintf("cancel-timer cp=%d", a.Checkpoint) }

func (a PartComplete) String() string {
	return fmt.Sprintf("part-complete cp=%d first-ch=%d", a.Checkpoint, a.FirstChannel) +
		flag(a.Unaligned, " unaligned") + flag(a.TimedOut, " timed-out") +
		fmt.Sprintf(" buffered=%d/%dB persisted=%d/%dB", a.BufferedRecords, a.BufferedBytes, a.PersistedRecords, a.PersistedBytes)
}

func (a AbortCheckpoint) String() string {
	return fmt.Sprintf("abort cp=%d reason=%v", a.Checkpoint, a.Reason) + flag(a.SnapshotTaken, " snapshot-taken")
}

func (InputEnded) String() string { return "input-ended" }

func (a Fail) String() string { return fmt.Sprintf("fail: %v", a.Err) }

func flag(on bool, s string) string {
	if on {
		return s
	}
	return ""
}
