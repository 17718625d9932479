// Package sink writes a job's output rows to a directory under one of three
// delivery contracts, and reads that directory back (Resolve) the way every
// test and the summary judge it.
//
// The output contract: every row carries the job's write-key columns and an
// int64 _version. Visible data files are those in the directory whose names
// do not start with "_" or ".". Resolving the directory keeps, for each write
// key, the visible row with the greatest _version.
package sink

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// VersionColumn is the name of the version column every output row carries.
const VersionColumn = "_version"

// Mode is a delivery contract.
type Mode string

const (
	// Append writes every row to visible files as it comes. A replay after a
	// crash can make the same row visible twice; such duplicates are counted
	// and reported, never hidden.
	Append Mode = "append"
	// Idempotent upserts rows by write key into an embedded store, with
	// _version deciding, and exports the table to visible files when the run
	// completes. A replayed write replaces and never adds.
	Idempotent Mode = "idempotent"
	// Transactional stages rows per epoch and makes an epoch's rows visible
	// only when the executor commits it, after the batch or recovery point
	// covering them has completed.
	Transactional Mode = "transactional"
)

// Modes lists the valid modes, for flag validation.
var Modes = []Mode{Append, Idempotent, Transactional}

// ParseMode validates s.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("invalid sink mode %q: allowed are append, idempotent, transactional", s)
}

// Format is the file format of visible output files.
type Format string

const (
	Parquet Format = "parquet"
	CSV     Format = "csv"
)

// ParseFormat validates s.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Parquet, CSV:
		return Format(s), nil
	}
	return "", fmt.Errorf("invalid output format %q: allowed are parquet, csv", s)
}

// Layout describes the rows a job writes.
type Layout struct {
	// Schema of output batches: all int64 columns, including the write-key
	// columns and VersionColumn.
	Schema *arrow.Schema
	// WriteKey names the columns that identify a row for upserts and
	// resolution.
	WriteKey []string
}

// Sink is one output directory under one contract. Executors get one Writer
// per sink subtask and drive epochs: an epoch is the batch id (micro-batch),
// the recovery point id (record-at-a-time) or the finite job id (disk-phase)
// that covers the rows.
type Sink interface {
	Mode() Mode
	// Writer returns the writer of sink subtask `subtask` for one attempt.
	// A new attempt after a crash gets a new Writer; whatever an abandoned
	// writer had not flushed is lost, as a killed worker's buffers are.
	Writer(subtask int, attempt int) (Writer, error)
	// Commit makes every flushed epoch <= epoch visible (transactional). It
	// is idempotent and safe to repeat after a crash mid-commit. Visible
	// names depend on (epoch, subtask, part) but not on the attempt, so an
	// epoch re-delivered by a later attempt replaces what an earlier attempt
	// published rather than adding to it. This relies on a contract the
	// executors keep: a re-delivery of (epoch, subtask) flushes the same
	// number of parts as the delivery it replaces (every executor flushes
	// each epoch once per subtask). No-op for the other modes.
	Commit(epoch int64) error
	// Record makes durable the sink's own record of what recovery point
	// epoch covers (append: the files flushed for epochs <= epoch), so a
	// resume from that point can check them. Executors call it once every
	// sink subtask has flushed the epoch and before the point itself is
	// written: a kill in between leaves a record of a point that never
	// became durable, which a resume ignores, never a durable point whose
	// files are not on record. No-op for the other modes, whose flushes
	// record themselves (transactional) or need no record (idempotent).
	Record(epoch int64) error
	// Recover is called when a run resumes from a state that covers epochs
	// <= complete: staged epochs <= complete are committed, newer staged
	// epochs are discarded (they will be produced again).
	Recover(complete int64) error
	// Finish completes a bounded run: the idempotent store is exported to
	// visible files. Append and transactional have nothing left to do.
	Finish() error
	// Close releases the sink's resources without finishing.
	Close() error
}

// Record is the modes' default: nothing to record (see Sink).
func (*base) Record(int64) error { return nil }

// Receipter is implemented by sinks whose flushes are visible at once
// (append), for an executor that marks one writer's flush as done in a
// mark of its own between two recovery points (disk-phase marks each
// partition of a job commit, so a redone commit does not write it twice).
// The mark carries the writer's receipt; a redone commit passes it to
// Adopt instead of writing the partition again.
type Receipter interface {
	// Receipt describes what w's flushes made visible. It is never empty,
	// even when nothing was, so an empty mark reads as a damaged one.
	Receipt(w Writer) ([]byte, error)
	// Adopt checks the files a receipt names, with an error naming one
	// that is missing or changed, and lists them in the next Record of
	// epoch.
	Adopt(epoch int64, receipt []byte) error
}

// MidFinisher is implemented by sinks whose Finish has a step in the
// middle a crash can land on (idempotent: the export is durable under a
// temporary name, not published). FinishWith is Finish calling mid there;
// an error from mid abandons the Finish.
type MidFinisher interface {
	FinishWith(mid func() error) error
}

// EpochPublisher is implemented by sinks that publish rows per epoch
// (transactional): what they already made visible can be read back by
// epoch, so an executor that resumes from an older recovery point than the
// newest one published can keep from publishing the same rows twice.
type EpochPublisher interface {
	// PublishedAfter returns the visible rows of epochs > after, in the
	// layout's column order, and the greatest published epoch (-1: none).
	PublishedAfter(after int64) (last int64, rows [][]int64, err error)
}

// Writer receives rows from one sink subtask.
type Writer interface {
	// Write takes rows belonging to epoch. The batch is borrowed.
	Write(epoch int64, batch arrow.RecordBatch) error
	// Flush makes everything written so far durable: append publishes a
	// visible file, idempotent commits the upserts, transactional stages a
	// file for epoch (pre-commit) that Commit will later publish.
	Flush(epoch int64) error
	// Close drops the writer. Unflushed rows are discarded.
	Close() error
}
