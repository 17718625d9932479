package barrier

import (
	"fmt"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Input is one event the I/O loop hands to Handler.Step. The concrete types
// are Record[T], Barrier, EndOfChannel, TimerFired and Cancel; the set is
// closed (the marker method is unexported).
type Input interface {
	isInput()
	String() string
}

// Record is a record (or batch) arriving on Channel. The result is Process,
// or Buffered if the channel is blocked; in unaligned checkpoints it may be
// preceded by PersistChannelState. This is the hot path: Step copies the
// item out of the input without keeping the input, so passing a Record
// does not allocate.
type Record[T any] struct {
	Channel Channel
	Item    Item[T]
}

// Barrier is barrier Checkpoint arriving on Channel. Each channel's events
// must be delivered in channel order: a barrier must not be handed over
// ahead of records the loop has already queued before it on that channel
// (as Flink's priority barriers do), because the handler would take those
// records for post-barrier ones and neither snapshot nor persist them.
type Barrier struct {
	Channel    Channel
	Checkpoint checkpoint.ID
}

// EndOfChannel is the end of Channel. An ended channel counts as having
// delivered every later barrier; nothing may follow it on that channel.
type EndOfChannel struct {
	Channel Channel
}

// TimerFired is the alignment timer of Checkpoint, which the loop started
// on StartTimer. A timer for a checkpoint that is no longer aligning is
// ignored, so the loop need not cancel timers reliably.
type TimerFired struct {
	Checkpoint checkpoint.ID
}

// Cancel aborts Checkpoint here (the coordinator abandoned it, or a cancel
// marker for it arrived). Barriers of it that arrive later are dropped.
// Cancelling a newer checkpoint than the pending one aborts both.
type Cancel struct {
	Checkpoint checkpoint.ID
}

func (Record[T]) isInput()    {}
func (Barrier) isInput()      {}
func (EndOfChannel) isInput() {}
func (TimerFired) isInput()   {}
func (Cancel) isInput()       {}

func (r Record[T]) String() string {
	return fmt.Sprintf("record ch=%d value=%v records=%d bytes=%d", r.Channel, r.Item.Value, r.Item.Records, r.Item.Bytes)
}

func (b Barrier) String() string {
	return fmt.Sprintf("barrier ch=%d cp=%d", b.Channel, b.Checkpoint)
}

func (e EndOfChannel) String() string { return fmt.Sprintf("end ch=%d", e.Channel) }
func (t TimerFired) String() string   { return fmt.Sprintf("timer-fired cp=%d", t.Checkpoint) }
func (c Cancel) String() string       { return fmt.Sprintf("cancel cp=%d", c.Checkpoint) }
