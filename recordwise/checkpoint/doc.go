// Package checkpoint is the pure protocol core of the recordwise
// coordinator: it decides when a recovery point (checkpoint) starts, when it
// is complete, when it is abandoned and which old ones to delete, and it
// picks the recovery point to resume from after a crash.
//
// Like etcd's raft, the Coordinator performs no I/O, starts no goroutine and
// reads no clock. The I/O loop that owns it calls one input method per
// event (a trigger tick, a task's acknowledgement, a timer, a storage
// confirmation), passing the current time in, and carries out the returned
// actions in order. That keeps every protocol decision deterministic and
// testable by feeding it sequences of inputs.
//
// The life of one checkpoint:
//
//	Trigger ─► InjectBarrier + ScheduleTimeout
//	Ack × every task, each part durable ─► WriteMetadata
//	MetadataWritten ─► NotifyComplete (+ DeleteOld beyond the retained count)
//
// Any Decline, Timeout, TaskFailed, MetadataFailed or Stop before completion
// (or a newer checkpoint completing first) ends it with Abort + DiscardParts. The metadata object is the only thing that makes
// a checkpoint usable: parts without metadata are never restored, even when
// every one of them is durable (see Restore).
package checkpoint
