package microbatch

// Named crash points (rewind run --executor microbatch --list-fail-points).
//
// Every point is reached exactly once per attempt of a batch, except
// PointMidRun, which every worker reaches once per attempt. The occurrence
// count of --fail point=NAME,occurrence=K therefore counts batch attempts:
// occurrence K of a coordinator point is reached in the K-th batch attempt
// that gets that far.
//
// Coordinator points kill the coordinator: every in-memory structure of the
// coordinator and its workers is discarded and a fresh coordinator restarts
// from durable storage, re-opened sources and Sink.Recover. PointMidRun
// kills the worker that reaches it; the coordinator survives and replaces
// it.
const (
	// PointBeforeOffsets: batch N is planned (end positions decided), nothing
	// of it is durable yet. Planned ahead, batch N-1 is sealed and its
	// commit entry not yet written.
	PointBeforeOffsets = "batch.before-offsets"
	// PointOffsetsMidWrite: offsets/N is encoded and being written. Put is
	// atomic, so the crash leaves no offsets/N object. Planned ahead, the
	// commit entry of batch N-1 is in flight: it lands or not.
	PointOffsetsMidWrite = "batch.offsets-mid-write"
	// PointAfterOffsets: offsets/N is durable, the batch has not run.
	PointAfterOffsets = "batch.after-offsets"
	// PointMidRun: a worker dies in the middle of the batch, after it has
	// fed its first input to its operators.
	PointMidRun = "batch.mid-run"
	// PointStateMidWrite: some of the writes of state version N (objects
	// and manifest) are durable, not all. The sink flush runs beside the
	// state writes, so it may be done, in flight or not begun.
	PointStateMidWrite = "batch.state-mid-write"
	// PointAfterState: every object and the manifest of state version N
	// are durable; the sink flush may still be in flight.
	PointAfterState = "batch.after-state"
	// PointSinkMidWrite: some sink subtasks have flushed batch N, not all;
	// the state writes may be done, in flight or not begun.
	PointSinkMidWrite = "batch.sink-mid-write"
	// PointAfterSink: every sink subtask has flushed batch N (append:
	// visible; idempotent: upserted; transactional: staged, invisible); the
	// state writes may still be in flight.
	PointAfterSink = "batch.after-sink"
	// PointCommitMidWrite: commits/N is encoded and being written; Put is
	// atomic, so the crash leaves no commits/N object. (With batch N+1
	// planned ahead, this comes before offsets/N+1 is written.)
	PointCommitMidWrite = "batch.commit-mid-write"
	// PointAfterCommit: commits/N is durable; a transactional sink has not
	// published batch N yet.
	PointAfterCommit = "batch.after-commit"
)

// failPoints is the list FailPoints returns, in protocol order.
var failPoints = []string{
	PointBeforeOffsets,
	PointOffsetsMidWrite,
	PointAfterOffsets,
	PointMidRun,
	PointStateMidWrite,
	PointAfterState,
	PointSinkMidWrite,
	PointAfterSink,
	PointCommitMidWrite,
	PointAfterCommit,
}
