// Package microbatch serves an endless input as repeated small finite jobs.
// The seam after each batch is a moment with nothing in flight, so it is the
// recovery point and no marker is needed. The price is a latency floor of
// one trigger interval.
//
// For batch N a coordinator (1) decides the end position of every source
// partition, (2) durably logs offsets/N before any work on the batch, (3)
// runs the finite job over [start, end) on the workers (stages and hash
// exchanges inside the batch, the shared operators only), (4) writes state
// version N (per stage and key group; deltas, a full snapshot every K
// versions, and a manifest) while (5) it hands the batch to the sink with
// its batch id, and, once both are durable, (6) logs commits/N; a
// transactional sink publishes batch N only after that. When the next
// trigger is due by then, batch N+1 is planned and offsets/N+1 written
// beside commits/N; N+1 runs once both are durable. A restart resumes
// from the newest commit and re-runs the one logged, uncommitted batch with
// exactly its logged positions; it never plans such a batch anew (an entry
// written ahead of it had no work begun and is planned again).
//
// The protocol is a pure state machine (Machine: events in, actions out, no
// goroutines, no clock); restart planning (PlanRestart) and retention
// (RetentionDeletes) are pure functions of a storage listing. The
// coordinator's I/O loop executes the actions. Every crash is real: a
// killed worker's operators, buffers, read-ahead input and sink buffers are
// dropped; a crashed coordinator is replaced by a new one built from durable
// storage, re-opened sources and the sink's own recovery alone.
//
// See docs/microbatch.md for the protocol, the durable layout, the crash
// points and the definitions of every figure the executor reports.
package microbatch
