package barrier

import (
	"errors"
	"fmt"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Channel is the index of an input channel, 0 to N-1.
type Channel int

// Item is a record or a batch of records as the handler sees it: an opaque
// value plus the sizes the alignment metrics report.
type Item[T any] struct {
	Value   T
	Records int   // records in Value: 1 for a single record
	Bytes   int64 // approximate size of Value
}

type eventKind uint8

const (
	recordEvent eventKind = iota
	barrierEvent
	endEvent
)

// event is one input as it arrived on a channel. Events of blocked
// channels are queued as events, not only records, because a barrier or an
// end queued behind a record must take effect after it.
type event[T any] struct {
	kind     eventKind
	ch       Channel
	item     Item[T]
	id       checkpoint.ID
	replayed bool
}

// Handler handles barriers for one subtask with N input channels, one
// checkpoint at a time: a barrier of a newer checkpoint on a channel that
// has not delivered the pending one's aborts the pending one (Subsumed).
// With the coordinator's default of one pending checkpoint this only
// happens when an upstream subtask gave the older checkpoint up.
//
// Misuse that can only be a bug in the loop (a channel out of range, or
// input on a channel after its end) comes out of Step as a Fail action.
//
// A Handler is not safe for concurrent use.
type Handler[T any] struct {
	mode   Mode
	st     state[T]
	closed []bool // EndOfChannel was called (its end may still be queued)
	ended  []bool // the end took effect: counts as every future barrier
	open   int    // channels whose end has not taken effect
	// latest is the newest checkpoint started or aborted here; barriers
	// for it or older ones that do not match the pending checkpoint are
	// leftovers of aborted checkpoints and are dropped.
	latest checkpoint.ID
	queue  []event[T] // events held back from blocked channels, arrival order
	out    []Action
	procs  []Process[T] // what the *Process actions in out point to
}

// New returns a handler for a subtask with channels input channels.
func New[T any](channels int, mode Mode) (*Handler[T], error) {
	if channels < 1 {
		return nil, errors.New("barrier: a subtask needs at least one input channel")
	}
	if err := mode.validate(); err != nil {
		return nil, err
	}
	return &Handler[T]{
		mode:   mode,
		st:     waitingForFirstBarrier[T]{},
		closed: make([]bool, channels),
		ended:  make([]bool, channels),
		open:   channels,
	}, nil
}

// Step takes one input and returns the actions it decided, in order. The
// returned slice belongs to the handler and is only valid until the next
// Step: carry the actions out (or copy what you keep) before stepping
// again. Reusing it keeps the record path free of allocations.
func (h *Handler[T]) Step(in Input) []Action {
	// The previous result is void now: drop its values, which the loop
	// owns, and reuse the buffer.
	clear(h.procs)
	h.procs = h.procs[:0]
	// Each case reads its fields out of the concrete input; nothing keeps
	// in itself, so a caller's Record stays on its stack.
	switch in := in.(type) {
	case Record[T]:
		if h.takes(in.Channel, "record") {
			h.dispatch(event[T]{kind: recordEvent, ch: in.Channel, item: in.Item})
		}
	case Barrier:
		if h.takes(in.Channel, "barrier") {
			h.dispatch(event[T]{kind: barrierEvent, ch: in.Channel, id: in.Checkpoint})
		}
	case EndOfChannel:
		if h.takes(in.Channel, "end") {
			h.closed[in.Channel] = true
			h.dispatch(event[T]{kind: endEvent, ch: in.Channel})
		}
	case TimerFired:
		h.st.timerFired(h, in.Checkpoint)
	case Cancel:
		h.st.cancel(h, in.Checkpoint)
	default:
		// Naming in's type here would make every input escape to the
		// heap; the only input type left is a Record of another T.
		h.emit(Fail{Err: fmt.Errorf("barrier: an input this handler does not take (a record of another item type?) while %s", h.st.name())})
	}
	return h.flush()
}

// Pending returns the checkpoint being aligned or collected, if any.
func (h *Handler[T]) Pending() (checkpoint.ID, bool) { return h.st.pending() }

// Blocked reports whether channel c is blocked: a loop that honours it
// stops reading c, so the handler's queue stays empty.
func (h *Handler[T]) Blocked(c Channel) bool { return h.st.blocks(c) }

// Queued returns how many events (records, barriers, ends) are held back
// from blocked channels.
func (h *Handler[T]) Queued() int { return len(h.queue) }

// State names the current phase, for traces.
func (h *Handler[T]) State() string { return h.st.name() }

// Mode returns the handler's mode.
func (h *Handler[T]) Mode() Mode { return h.mode }

// takes reports whether channel c may deliver input now, and emits Fail
// if not.
func (h *Handler[T]) takes(c Channel, what string) bool {
	switch {
	case c < 0 || int(c) >= len(h.closed):
		h.emit(Fail{Err: fmt.Errorf("barrier: %s on channel %d of %d while %s", what, c, len(h.closed), h.st.name())})
		return false
	case h.closed[c]:
		h.emit(Fail{Err: fmt.Errorf("barrier: %s on channel %d after its end while %s", what, c, h.st.name())})
		return false
	}
	return true
}

func (h *Handler[T]) emit(a Action) { h.out = append(h.out, a) }

// process emits a Process action without allocating: it points into procs.
// When append moves procs, the actions already emitted keep pointing at
// the old array, which still holds their values.
func (h *Handler[T]) process(c Channel, it Item[T], replayed bool) {
	h.procs = append(h.procs, Process[T]{Channel: c, Item: it, Replayed: replayed})
	h.emit(&h.procs[len(h.procs)-1])
}

// flush returns the actions of the current call and makes the buffer ready
// for the next one. Reusing it saves an allocation per record on the hot
// path; the price is that a result is only valid until the next call.
func (h *Handler[T]) flush() []Action {
	out := h.out
	h.out = h.out[:0:cap(h.out)]
	return out
}

// dispatch routes one event to the current state, or holds it back if its
// channel is blocked.
func (h *Handler[T]) dispatch(e event[T]) {
	if h.st.blocks(e.ch) {
		h.hold(e)
		return
	}
	switch e.kind {
	case recordEvent:
		h.st.record(h, e.ch, e.item, e.replayed)
	case barrierEvent:
		h.st.barrier(h, e.ch, e.id)
	case endEvent:
		h.ended[e.ch] = true
		h.open--
		h.st.channelEnded(h, e.ch)
		if h.open == 0 {
			h.emit(InputEnded{})
		}
	}
}

func (h *Handler[T]) hold(e event[T]) {
	h.queue = append(h.queue, e)
	if e.kind != recordEvent {
		return
	}
	s := h.st.(*collectingAligned[T]) // the only state that blocks channels
	s.bufRecords += e.item.Records
	s.bufBytes += e.item.Bytes
	h.emit(Buffered{Checkpoint: s.id, Channel: e.ch, Records: e.item.Records, Bytes: e.item.Bytes})
}

// release unblocks the given channels and feeds the held-back events
// through the current state again, in arrival order. Every held event came
// after a barrier on its own channel, so replaying them as if they arrived
// now keeps each channel's order; one may block its channel again (a
// barrier of the next checkpoint), and then what follows it is held again.
func (h *Handler[T]) release(blocked []bool) {
	for c, b := range blocked {
		if b {
			h.emit(UnblockChannel{Channel: Channel(c)})
		}
	}
	q := h.queue
	h.queue = nil
	for _, e := range q {
		e.replayed = true
		h.dispatch(e)
	}
}

// start begins checkpoint id at its first barrier, on channel c.
func (h *Handler[T]) start(c Channel, id checkpoint.ID) {
	h.latest = id
	a := alignment{id: id, first: c, arrived: make([]bool, len(h.ended))}
	a.arrived[c] = true
	h.emit(AlignmentStarted{Checkpoint: id, FirstChannel: c})
	if h.mode.unaligned {
		s := &collectingUnaligned[T]{alignment: a}
		h.st = s
		h.emit(ForwardBarrier{Checkpoint: id, Overtaking: true})
		h.emit(Snapshot{Checkpoint: id, Unaligned: true})
		s.maybeComplete(h)
		return
	}
	s := &collectingAligned[T]{alignment: a, blocked: make([]bool, len(h.ended))}
	h.st = s
	if s.done(h.ended) {
		s.complete(h)
		return
	}
	s.block(h, c)
	if h.mode.timeout > 0 {
		s.timer = true
		h.emit(StartTimer{Checkpoint: id, After: h.mode.timeout})
	}
}
