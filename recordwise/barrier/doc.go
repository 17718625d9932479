// Package barrier is the pure protocol core that turns the barriers reaching
// one operator subtask on its N input channels into a snapshot covering
// exactly one prefix of every channel: aligned, unaligned, or aligned with a
// timeout that switches a slow checkpoint to unaligned.
//
// Like etcd's raft, a Handler performs no I/O, starts no goroutine and reads
// no clock. The I/O loop that owns the subtask hands it one Input per event
// it reads (a Record, a Barrier, an EndOfChannel, a TimerFired it was asked
// to run, a Cancel) through Step, and carries out the returned actions in
// order. Failure is an action too: Fail, for input only a buggy loop sends.
// The slice Step returns, and the *Process values in it, are only valid
// until the next Step.
//
// # States
//
// Each phase of a checkpoint is its own type (waitingForFirstBarrier,
// collectingAligned, collectingUnaligned), as in Flink's barrier handler, so
// that what may happen in each phase can be read off one type's methods.
// Barrier n below is the pending checkpoint's; a barrier of a newer one on
// a channel that has not delivered n aborts n (Subsumed) and then starts
// the newer one.
//
//	                         first barrier n
//	  ┌──────────────────┐   (Unaligned mode)    ┌──────────────────────┐
//	  │ waitingForFirst- │──────────────────────►│ collectingUnaligned  │
//	  │ Barrier          │                       │ snapshot taken;      │
//	  │ records: Process │◄──────────────────────│ records of channels  │
//	  └──────────────────┘   n on every channel  │ without n: Persist-  │
//	       │      ▲          (PartComplete),     │ ChannelState+Process │
//	       │      │          newer barrier or    └──────────────────────┘
//	       │      │          Cancel (Abort)                ▲
//	 first │      │ n on every channel                     │ TimerFired(n)
//	 barr. │      │ (Snapshot, ForwardBarrier,             │ (Snapshot unaligned,
//	 n     │      │ PartComplete, Unblock, replay),        │ ForwardBarrier
//	(Aligned)     │ newer barrier or Cancel (Abort)        │ overtaking, replay
//	       ▼      │                                        │ held records)
//	  ┌────────────────────┐                               │
//	  │ collectingAligned  │───────────────────────────────┘
//	  │ channels with n:   │  (AlignedWithTimeout only)
//	  │ BlockChannel, hold │
//	  │ their input        │
//	  └────────────────────┘
//
// An ended channel counts as having delivered every barrier, so an end can
// complete an alignment. When every channel has ended, Step emits
// InputEnded.
//
// # Driver loop
//
// A loop serving one subtask, in outline (the recordwise task is the real
// one):
//
//	for {
//		var in barrier.Input
//		switch ev := next(); ev.kind { // a channel not Blocked, or a timer
//		case data:
//			in = barrier.Record[T]{Channel: ev.ch, Item: barrier.Item[T]{Value: ev.v, Records: n, Bytes: b}}
//		case marker:
//			in = barrier.Barrier{Channel: ev.ch, Checkpoint: ev.id}
//		case end:
//			in = barrier.EndOfChannel{Channel: ev.ch}
//		case timer:
//			in = barrier.TimerFired{Checkpoint: ev.id}
//		case cancel: // from the coordinator or a cancel marker
//			in = barrier.Cancel{Checkpoint: ev.id}
//		}
//		for _, a := range h.Step(in) {
//			switch a := a.(type) {
//			case *barrier.Process[T]:
//				run the operator on a.Item.Value
//			case barrier.BlockChannel:
//				stop reading a.Channel (backpressure) until UnblockChannel
//			case barrier.Snapshot:
//				snapshot the operator now, before any further Process
//			case barrier.ForwardBarrier:
//				emit the barrier on every output; Overtaking: ahead of the
//				queued output, which becomes output channel state
//			case barrier.PersistChannelState[T]:
//				keep a.Item as input channel state of a.Checkpoint (its
//				Process follows)
//			case barrier.StartTimer:
//				arrange a TimerFired{a.Checkpoint} after a.After
//			case barrier.PartComplete:
//				finish writing the part, then ack it to the coordinator
//			case barrier.AbortCheckpoint:
//				decline to the coordinator, drop what was written for it,
//				send a cancel marker downstream
//			case barrier.InputEnded:
//				end the outputs
//			case barrier.Fail:
//				stop the subtask with a.Err
//			}
//		}
//	}
//
// Nothing may be processed between a Snapshot and the ForwardBarrier next
// to it. The testdata scripts (run by TestDataDriven) walk through each
// protocol: aligned and unaligned alignment, a barrier overtaking a pending
// one, the timeout switch, and cancellation.
package barrier
