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
// StartTimer, CancelTimer, PartComplete, AbortCheckpoint and InputEnded.
type Action interface {
	isAction()
}

// Process tells the loop to run the operator on the record now. Replayed
// marks a record the handler had buffered from a blocked channel and now
// releases, in its original arrival order.
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

func (Process[T]) isAction()             {}
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
