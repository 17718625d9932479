// Package checkpoint is the pure protocol core of the recordwise
// coordinator: it decides when a recovery point (checkpoint) starts, when it
// is complete, when it is abandoned and which old ones to delete, and it
// picks the recovery point to resume from after a crash (Restore).
//
// Like etcd's raft, the Coordinator performs no I/O, starts no goroutine and
// reads no clock. The I/O loop that owns it hands it one Input per event (a
// Trigger tick, a task's Ack, a Timeout it was asked to run, a storage
// confirmation), each carrying the loop's current time, through Step, and
// carries out the returned actions in order. That keeps every protocol
// decision deterministic and testable by feeding it sequences of inputs;
// the testdata scripts (run by TestDataDriven) walk through each case.
// The slice Step returns is only valid until the next Step.
//
// # States of one checkpoint
//
//	       Trigger
//	          │  InjectBarrier, ScheduleTimeout
//	          ▼
//	   ┌────────────┐  Decline, Timeout, TaskFailed ──► Failed
//	   │ Collecting │  Stop, newer one completes    ──► Aborted
//	   └────────────┘  (each: Abort, DiscardParts)
//	          │  Ack × every task, every part durable
//	          │  (Ack durable or PartsWritten): WriteMetadata
//	          ▼
//	┌─────────────────┐  MetadataFailed ──► Failed (Abort, DiscardParts)
//	│ WritingMetadata │  Timeout, Decline, TaskFailed, Stop: ignored,
//	└─────────────────┘  because the write may land
//	          │  MetadataWritten
//	          ▼
//	    ┌───────────┐
//	    │ Completed │  NotifyComplete (+ DeleteOld beyond Retained)
//	    └───────────┘
//
// A Trigger while Config.MaxConcurrent checkpoints are pending starts
// nothing (TriggerSkipped). The metadata object is the only thing that
// makes a checkpoint usable: parts without metadata are never restored,
// even when every one of them is durable (see Restore).
//
// # Driver loop
//
// The recordwise coordinator loop is the real one; in outline:
//
//	for ev := range events {
//		var in checkpoint.Input
//		now := clock.Now()
//		switch ev.kind {
//		case tick:
//			in = checkpoint.Trigger{Now: now}
//		case ack:
//			in = checkpoint.Ack{Now: now, ID: ev.id, Task: ev.task, Part: ev.part}
//		case timer:
//			in = checkpoint.Timeout{Now: now, ID: ev.id}
//		...
//		}
//		for _, a := range c.Step(in) {
//			switch a := a.(type) {
//			case checkpoint.InjectBarrier:
//				tell every source to record its position and emit barrier a.ID
//			case checkpoint.ScheduleTimeout:
//				arrange a Timeout{ID: a.ID} after a.After
//			case checkpoint.WriteMetadata:
//				write the metadata object atomically, then feed
//				MetadataWritten or MetadataFailed back in as a new event
//				(not from inside this loop: the slice is the core's)
//			case checkpoint.NotifyComplete:
//				tell every task; sinks publish what a.ID covers
//			case checkpoint.Abort:
//				tell every task to drop what it holds for a.ID
//			case checkpoint.DiscardParts, checkpoint.DeleteOld:
//				delete the metadata object first, then the parts
//			case checkpoint.Fail:
//				stop with a.Err
//			}
//		}
//	}
//
// Persist before acknowledging: a task acks a part as Durable only once
// it is in durable shared storage, and the loop steps MetadataWritten only
// once the metadata object is.
package checkpoint
