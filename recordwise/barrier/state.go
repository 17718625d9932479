package barrier

import "github.com/rewind-engine/rewind/recordwise/checkpoint"

// state is one phase of the handler. Events reach it only for channels it
// does not block; the handler queues the others.
type state[T any] interface {
	name() string
	pending() (checkpoint.ID, bool)
	blocks(c Channel) bool
	record(h *Handler[T], c Channel, it Item[T], replayed bool)
	barrier(h *Handler[T], c Channel, id checkpoint.ID)
	channelEnded(h *Handler[T], c Channel)
	timerFired(h *Handler[T], id checkpoint.ID)
	cancel(h *Handler[T], id checkpoint.ID)
}

// waitingForFirstBarrier: no checkpoint is pending; records are processed
// as they come.
type waitingForFirstBarrier[T any] struct{}

func (waitingForFirstBarrier[T]) name() string                          { return "waiting for first barrier" }
func (waitingForFirstBarrier[T]) pending() (checkpoint.ID, bool)        { return 0, false }
func (waitingForFirstBarrier[T]) blocks(Channel) bool                   { return false }
func (waitingForFirstBarrier[T]) channelEnded(*Handler[T], Channel)     {}
func (waitingForFirstBarrier[T]) timerFired(*Handler[T], checkpoint.ID) {}

func (waitingForFirstBarrier[T]) record(h *Handler[T], c Channel, it Item[T], replayed bool) {
	h.process(c, it, replayed)
}

func (waitingForFirstBarrier[T]) barrier(h *Handler[T], c Channel, id checkpoint.ID) {
	if id <= h.latest {
		return // a late barrier of a checkpoint completed or aborted here
	}
	h.start(c, id)
}

func (waitingForFirstBarrier[T]) cancel(h *Handler[T], id checkpoint.ID) {
	if id <= h.latest {
		return
	}
	// Remember it, so its barriers are dropped when they come.
	h.latest = id
	h.emit(AbortCheckpoint{Checkpoint: id, Reason: Canceled})
}

// alignment is what both collecting phases know about the pending
// checkpoint.
type alignment struct {
	id      checkpoint.ID
	first   Channel
	arrived []bool // channel delivered barrier id

	bufRecords int
	bufBytes   int64
	perRecords int
	perBytes   int64
}

func (a *alignment) pending() (checkpoint.ID, bool) { return a.id, true }

// done reports whether barrier id has arrived on every channel that has
// not ended.
func (a *alignment) done(ended []bool) bool {
	for c, ok := range a.arrived {
		if !ok && !ended[c] {
			return false
		}
	}
	return true
}

func (a *alignment) partComplete(unaligned, timedOut bool) PartComplete {
	return PartComplete{
		Checkpoint:       a.id,
		FirstChannel:     a.first,
		Unaligned:        unaligned,
		TimedOut:         timedOut,
		BufferedRecords:  a.bufRecords,
		BufferedBytes:    a.bufBytes,
		PersistedRecords: a.perRecords,
		PersistedBytes:   a.perBytes,
	}
}

// collectingAligned: barrier id arrived on some channels, which are
// blocked; records of the others are processed because they still precede
// the barrier. Alignment ends when every channel delivered the barrier (or
// ended): snapshot, forward, unblock, replay what was held.
type collectingAligned[T any] struct {
	alignment
	blocked []bool // BlockChannel was emitted (the last barrier blocks nothing)
	timer   bool   // a StartTimer is outstanding
}

func (s *collectingAligned[T]) name() string          { return "collecting aligned" }
func (s *collectingAligned[T]) blocks(c Channel) bool { return s.arrived[c] }

func (s *collectingAligned[T]) record(h *Handler[T], c Channel, it Item[T], replayed bool) {
	h.process(c, it, replayed)
}

func (s *collectingAligned[T]) barrier(h *Handler[T], c Channel, id checkpoint.ID) {
	switch {
	case id < s.id:
		return
	case id > s.id:
		// Channel c skipped barrier s.id: an upstream subtask gave it up,
		// so it can never align here.
		s.abort(h, Subsumed)
		h.dispatch(event[T]{kind: barrierEvent, ch: c, id: id})
		return
	}
	s.arrived[c] = true
	if s.done(h.ended) {
		s.complete(h)
		return
	}
	s.block(h, c)
}

func (s *collectingAligned[T]) block(h *Handler[T], c Channel) {
	s.blocked[c] = true
	h.emit(BlockChannel{Checkpoint: s.id, Channel: c})
}

func (s *collectingAligned[T]) channelEnded(h *Handler[T], _ Channel) {
	if s.done(h.ended) {
		s.complete(h)
	}
}

func (s *collectingAligned[T]) timerFired(h *Handler[T], id checkpoint.ID) {
	if id != s.id || !s.timer {
		return
	}
	// Switch this checkpoint to unaligned. The state now reflects exactly
	// the pre-barrier records seen so far, so snapshot it. The held records
	// all follow the barrier on their channels: they are released and
	// processed but NOT persisted (the snapshot must not cover them, and
	// upstream replays them after a restore). What still arrives on the
	// other channels before their barrier is persisted from now on.
	u := &collectingUnaligned[T]{alignment: s.alignment, timedOut: true}
	h.st = u
	h.emit(ForwardBarrier{Checkpoint: s.id, Overtaking: true})
	h.emit(Snapshot{Checkpoint: s.id, Unaligned: true, TimedOut: true})
	h.release(s.blocked)
}

func (s *collectingAligned[T]) cancel(h *Handler[T], id checkpoint.ID) {
	if id < s.id {
		return
	}
	s.abort(h, Canceled)
	if id > s.id {
		h.st.cancel(h, id)
	}
}

func (s *collectingAligned[T]) complete(h *Handler[T]) {
	h.emit(Snapshot{Checkpoint: s.id})
	h.emit(ForwardBarrier{Checkpoint: s.id})
	if s.timer {
		h.emit(CancelTimer{Checkpoint: s.id})
	}
	h.emit(s.partComplete(false, false))
	h.st = waitingForFirstBarrier[T]{}
	h.release(s.blocked)
}

func (s *collectingAligned[T]) abort(h *Handler[T], r AbortReason) {
	h.emit(AbortCheckpoint{Checkpoint: s.id, Reason: r})
	if s.timer {
		h.emit(CancelTimer{Checkpoint: s.id})
	}
	h.st = waitingForFirstBarrier[T]{}
	h.release(s.blocked)
}

// collectingUnaligned: the snapshot is taken and the barrier forwarded.
// Records of channels that have not delivered barrier id yet precede it, so
// the snapshot misses them: each is persisted as channel state and then
// processed. The part is complete when every channel delivered the barrier
// (or ended).
type collectingUnaligned[T any] struct {
	alignment
	timedOut bool
}

func (s *collectingUnaligned[T]) name() string                          { return "collecting unaligned" }
func (s *collectingUnaligned[T]) blocks(Channel) bool                   { return false }
func (s *collectingUnaligned[T]) timerFired(*Handler[T], checkpoint.ID) {}

func (s *collectingUnaligned[T]) record(h *Handler[T], c Channel, it Item[T], replayed bool) {
	if !s.arrived[c] {
		h.emit(PersistChannelState[T]{Checkpoint: s.id, Channel: c, Item: it})
		s.perRecords += it.Records
		s.perBytes += it.Bytes
	}
	h.process(c, it, replayed)
}

func (s *collectingUnaligned[T]) barrier(h *Handler[T], c Channel, id checkpoint.ID) {
	switch {
	case id < s.id:
		return
	case id > s.id:
		// Only one checkpoint is collected at a time: the newer one wins
		// and this one's channel state stays incomplete.
		s.abort(h, Subsumed)
		h.dispatch(event[T]{kind: barrierEvent, ch: c, id: id})
		return
	}
	if !s.arrived[c] {
		s.arrived[c] = true
		s.maybeComplete(h)
	}
}

func (s *collectingUnaligned[T]) channelEnded(h *Handler[T], _ Channel) { s.maybeComplete(h) }

func (s *collectingUnaligned[T]) cancel(h *Handler[T], id checkpoint.ID) {
	if id < s.id {
		return
	}
	s.abort(h, Canceled)
	if id > s.id {
		h.st.cancel(h, id)
	}
}

func (s *collectingUnaligned[T]) maybeComplete(h *Handler[T]) {
	if !s.done(h.ended) {
		return
	}
	h.emit(s.partComplete(true, s.timedOut))
	h.st = waitingForFirstBarrier[T]{}
}

func (s *collectingUnaligned[T]) abort(h *Handler[T], r AbortReason) {
	h.emit(AbortCheckpoint{Checkpoint: s.id, Reason: r, SnapshotTaken: true})
	h.st = waitingForFirstBarrier[T]{}
	h.release(nil) // nothing is held while unaligned; kept for symmetry
}
