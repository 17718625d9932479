// Package operator is the one operator set every executor runs. Operators
// process arrow.RecordBatch values pushed into them and push their results to
// an Emitter. An operator never knows which executor drives it.
//
// # Batch ownership
//
// The contract follows arrow-go's reference counting and is the same in both
// directions:
//
//   - A batch passed to Process is borrowed. It is valid until Process
//     returns; the caller releases it afterwards. An operator that keeps rows
//     past the call copies them into its own state (the usual case) or calls
//     Retain and later Release.
//   - A batch passed to Emitter.Emit is borrowed by the emitter for the
//     duration of the call. The operator releases its own reference after
//     Emit returns. An emitter that queues the batch (a channel, a buffer)
//     must Retain it first.
//
// A batch is never mutated after it has been emitted. Output batches are
// allocated from Context.Alloc so tests with a checked allocator see every
// byte.
//
// Executors run their operators through a Chain, which links each
// operator's output to the next and fixes the order of Open, Restore, Flush,
// AdvanceWatermark, Snapshot and Close.
//
// # Event time
//
// AdvanceWatermark(wm) promises that no further input on any port carries an
// event time below wm, except rows the operator itself classifies as late.
// The executor computes watermarks (see Watermarks) and delivers them between
// batches; operators never read a clock.
//
// # State
//
// Operators with state implement Stateful. Their state is kept per key group
// (package keygroup) so it can be snapshotted, restored and moved per group.
// Snapshot is a synchronous, cheap copy into Arrow batches; encoding and
// writing them is the executor's business and may run concurrently with
// further Process calls.
package operator

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// Emitter receives the batches an operator produces. See the package comment
// for who owns the batch.
type Emitter interface {
	Emit(batch arrow.RecordBatch) error
}

// EmitFunc adapts a function to Emitter.
type EmitFunc func(arrow.RecordBatch) error

// Emit calls f.
func (f EmitFunc) Emit(b arrow.RecordBatch) error { return f(b) }

// Context is what an operator instance learns about where it runs.
type Context struct {
	// Alloc allocates every output batch and all Arrow memory of the state.
	Alloc memory.Allocator
	// Subtask is this instance's index in [0, Parallelism).
	Subtask, Parallelism int
	// KeyGroups are the key groups this instance owns. Keyed operators only
	// ever see rows of these groups (a hash exchange guarantees it).
	KeyGroups keygroup.Range
}

// Operator is one step of a job. Constructors take the input schema(s) and
// fail with a clear error when a needed column is missing or not int64, so a
// schema mismatch is caught when the job is built, not mid-run.
type Operator interface {
	// OutputSchema is the schema of every batch the operator emits.
	OutputSchema() *arrow.Schema
	// Open is called once, before Restore and before any input.
	Open(ctx Context) error
	// Process handles one batch that arrived on input port `port` (always 0
	// for single-input operators). The batch is borrowed.
	Process(port int, batch arrow.RecordBatch, out Emitter) error
	// AdvanceWatermark moves event time forward to wm: windows whose end is at
	// or before wm fire, and state that can no longer match is dropped.
	// Watermarks never go backwards; a smaller wm is ignored.
	AdvanceWatermark(wm int64, out Emitter) error
	// Flush emits what the operator has accumulated but not emitted yet (the
	// keyed aggregation's changed keys). Executors call it at the end of each
	// unit of input they deliver: a micro-batch, a network buffer, and always
	// before Snapshot. Operators with nothing pending emit nothing.
	Flush(out Emitter) error
	// Close frees the operator's memory. Emitting is not allowed from Close:
	// at the end of a bounded input the executor first advances the watermark
	// to EndOfTime.
	Close() error
}

// EndOfTime is the watermark delivered when every input is exhausted.
const EndOfTime int64 = 1<<63 - 1

// NoWatermark is the watermark before any input has been seen.
const NoWatermark int64 = -1 << 63

// Stateful is implemented by operators that hold values between batches.
type Stateful interface {
	Operator
	// Snapshot copies the state of every non-empty key group this instance
	// owns. It fails if Flush has not been called since the last input, since
	// pending output is not part of the state and would otherwise be lost. The copy is independent of the operator: processing may continue
	// while the caller encodes it. The caller releases the batches.
	Snapshot() ([]KeyGroupState, error)
	// Restore loads state previously produced by Snapshot (possibly by
	// instances of another parallelism; only owned key groups are passed).
	// It is called after Open and before any input. A snapshot holds only
	// non-empty key groups, so an operator that held nothing at the cut
	// cannot carry its watermark: executors save the watermark they last
	// delivered in the recovery point and call AdvanceWatermark with it right
	// after Restore. Restore retains what it
	// keeps; the caller still releases the batches it passed.
	Restore(parts []KeyGroupState) error
	// StateSchema is the schema of the batches Snapshot returns.
	StateSchema() *arrow.Schema
}

// KeyGroupState is the state of one key group of one operator as an Arrow
// batch whose schema is the operator's StateSchema.
type KeyGroupState struct {
	KeyGroup int
	Batch    arrow.RecordBatch
}

// ReleaseStates releases every batch in parts.
func ReleaseStates(parts []KeyGroupState) {
	for _, p := range parts {
		if p.Batch != nil {
			p.Batch.Release()
		}
	}
}

// LateCounter is implemented by operators that drop late rows.
type LateCounter interface {
	// LateRows is the number of rows dropped as late since Open.
	LateRows() int64
}
