// Package microbatch serves an endless input as repeated small finite jobs.
// The seam after each batch is a moment with nothing in flight, so it is the
// recovery point and no marker is needed. The price is a latency floor of
// one trigger interval.
//
// For batch N a coordinator (1) decides the end position of every source
// partition, (2) durably logs offsets/N before any work on the batch, (3)
// runs the finite job over [start, end) on the workers (stages and hash
// exchanges inside the batch, the shared operators only), (4) writes state
// version N (one object per stateful stage holding what changed in its
// key groups, as deltas or a full snapshot, and a manifest) while (5) it
// hands the batch to the sink with its batch id and makes the sink's
// record of it durable, and, once both are durable, (6) logs commits/N; a
// transactional sink publishes batch N only after that. When the next
// trigger is due by then, batch N+1 is planned and offsets/N+1 written
// beside commits/N; N+1 runs once both are durable. A restart resumes
// from the newest commit and re-runs the one logged, uncommitted batch with
// exactly its logged positions; it never plans such a batch anew (an entry
// written ahead of it had no work begun and is planned again).
//
// Restart planning (PlanRestart) and retention (RetentionDeletes) are pure
// functions of a storage listing. Every crash is real: a killed worker's
// operators, buffers, read-ahead input and sink buffers are dropped; a
// crashed coordinator is replaced by a new one built from durable storage,
// re-opened sources and the sink's own recovery alone.
//
// See docs/microbatch.md for the protocol, the durable layout, the crash
// points and the definitions of every figure the executor reports.
//
// # The commit protocol
//
// The order of durable steps, the crash points between them and the
// reaction to a lost worker are decided by a pure state machine, Machine,
// in the manner of etcd's raft package: Step takes one Event (something
// that happened) and returns the Actions to carry out, in order. It reads
// no clock (time comes in as the Now of an event), starts no goroutine
// and touches no storage, so every order is tested without I/O (see
// testdata/protocol). One batch, in the normal order:
//
//	          Started
//	             |
//	             v
//	+-------> Idle ----Tick----> Planning ---Planned empty---> Idle
//	|                               |    \---Planned done----> Finished
//	|                            Planned
//	|                               v
//	|                        LoggingOffsets
//	|                               | OffsetsLogged
//	|                               v
//	|                           Running
//	|                               | RunDone
//	|                               v
//	|                           Sealing   (StateCommitted and SinkDone,
//	|                               |      in either order)
//	|                               v
//	|                        LoggingCommit
//	|                               | CommitLogged
//	|                               v
//	+---------Published------- Publishing ---Published stop---> Finished
//
// Each arrow that crosses a durable step is preceded by the named crash
// point of that boundary (a Point action). From any state but Finished,
// WorkerLost leads to Rebuilding, and Rebuilt back to Idle (nothing of the
// batch was durable), Running (its offsets were: it runs again with them)
// or Publishing (it was committed: the publish is repeated).
//
// Sealing writes state version N and flushes the sink for batch N at the
// same time. Neither depends on the other: a restart trusts neither before
// commits/N exists, and a re-run of N writes both again from the same
// input. What the order protects is only that both are durable before
// commits/N, so the commit log waits for both events. Overlapping them
// takes the state writes off the path to the sink's visibility.
//
// Planning ahead: when the next trigger is already due as batch N is sealed
// (the batch overran its trigger), the machine goes from Sealing to
// PlanningAhead and plans batch N+1, then to LoggingAhead, writing
// offsets/N+1 beside commits/N. Batch N+1 runs only after both are
// durable, and only after batch N is published. So a log holding
// offsets/N+1 without commits/N means no work on N+1 began; a restart
// re-runs N and plans N+1 anew (PlanRestart).
//
// # Driving the machine
//
// The coordinator's I/O loop feeds events one at a time and carries out
// each returned action before the next event. The slice Step returns is
// the machine's buffer, valid until the next Step: copy what you keep.
// Actions that feed no event at once (CommitState, FlushSink, LogCommit,
// LogOffsets) may run beside the loop; their events are fed as they
// finish. A lost worker preempts the rest: the loop waits for the actions
// in flight and feeds WorkerLost carrying their events, so the machine
// learns what became durable. In outline:
//
//	queue := []Event{Started{Now: now(), LastCommitted: rp.LastCommitted, Rerun: rp.Rerun}}
//	for {
//		if len(queue) == 0 {
//			queue = append(queue, awaitInFlight()) // the next action to finish
//		}
//		ev := queue[0]
//		queue = queue[1:]
//		for _, a := range m.Step(ev) {
//			switch a := a.(type) {
//			case Fail:
//				return a.Err // a refused event: a bug, stop
//			case Finish:
//				return nil
//			case Point:
//				crashPoint(a.Name) // may end this coordinator
//			case LogOffsets:
//				// Durable before any work on the batch: only its
//				// OffsetsLogged lets the machine emit Run.
//				start(func() Event { put("offsets/N"); return OffsetsLogged{} })
//			case LogCommit:
//				// The commit point: written only after the state and the
//				// sink of the batch are durable (both events fed).
//				start(func() Event { put("commits/N"); return CommitLogged{} })
//			case Publish:
//				// Only now may a transactional sink show the batch.
//				queue = append(queue, publish(a.Batch))
//			default:
//				// WaitUntil, Plan, Run, CommitState, FlushSink, Rebuild:
//				// carry it out, feed back the event it documents.
//			}
//		}
//	}
package microbatch
