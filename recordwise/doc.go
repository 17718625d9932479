// Package recordwise runs long-lived workers through which each record flows
// as it arrives. A marker (barrier) injected at the sources travels with the
// records; each operator saves its part when the marker reaches it, aligned
// or unaligned, and the coordinator writes the recovery point's metadata only
// once every part is durable.
//
// The executor is the I/O loop around two pure protocol cores: package
// barrier (what one subtask does with the barriers on its input channels)
// and package checkpoint (the coordinator's decisions and the choice of the
// recovery point to restore). Around them it provides:
//
//   - tasks: one goroutine per subtask of each chain of forward-connected
//     stages; worker w runs subtask w of every chain;
//   - channels: bounded queues of small Arrow batches between subtasks,
//     filled from network buffers flushed when full or after the buffer
//     timeout, so that a slow consumer backpressures its producers; an
//     unaligned barrier can be put at a channel's head;
//   - the coordinator loop: triggers, acknowledgements, the metadata object
//     written last, sink commits, retention, the final checkpoint of a
//     bounded run;
//   - recovery: a crash kills a worker (or the coordinator); after the
//     detect delay every task is torn down and a new incarnation is built
//     from durable storage, the re-opened sources and the sink alone,
//     re-injecting in-flight data before new input;
//   - metrics: the checkpoint history (per task start delay, alignment,
//     sync and async durations, sizes) and the recovery bill.
//
// docs/recordwise.md describes the protocol, the storage layout, the named
// crash points and the metrics.
package recordwise
