// Package source defines the input contract every executor relies on for
// recovery, and the built-in sources: a seeded generator (gen:), files (file:)
// and a forgetful push feed (push:).
//
// Recovery is reprocessing, so the contract is about positions: a partition
// can be opened at a recorded position, every batch read reports the position
// after it, and a source says whether opening at an older position really
// gives the same records again (re-readable) or not (forgetful).
package source

import (
	"context"
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Column names of every input row.
const (
	ColID    = "id"
	ColKey   = "key"
	ColValue = "value"
	ColTS    = "ts" // event time in milliseconds
)

// Schema is the schema of every batch a source returns: int64 id (unique),
// key, value and ts.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: ColID, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColKey, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColValue, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColTS, Type: arrow.PrimitiveTypes.Int64},
}, nil)

// Column indexes in Schema.
const (
	IdxID = iota
	IdxKey
	IdxValue
	IdxTS
)

// Position is a recorded read position inside one partition: the number of
// records of that partition that come before it. Offset 0 is the start.
type Position struct {
	// Partition is the partition's stable name ("p3" for the generator, the
	// file name for file sources), so a saved position never silently applies
	// to another partition.
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Source is one named input of a job.
type Source interface {
	// Spec is the text the source was opened from, for messages and summaries.
	Spec() string
	// Partitions returns the stable partition names, in partition order.
	Partitions() []string
	// Rereadable reports whether opening a partition at an earlier position
	// yields exactly the records that followed that position before.
	Rereadable() bool
	// Bounded reports whether every partition ends (io.EOF) eventually.
	Bounded() bool
	// Open opens partition i at pos. pos.Partition must match
	// Partitions()[i]; pos.Offset 0 reads from the start.
	Open(ctx context.Context, i int, pos Position, alloc memory.Allocator) (Reader, error)
	// Close releases what the source holds (listeners, file handles).
	Close() error
}

// Sized is implemented by sources that know in advance how many records
// they hold (over all partitions), for progress displays.
type Sized interface {
	// Records returns the number of records, or 0 when it is not known.
	Records() int64
}

// Reader reads one partition.
type Reader interface {
	// Next returns the next batch of at most max rows and the position just
	// after it. The caller owns the batch and releases it. At the end of a
	// bounded partition Next returns (nil, pos, io.EOF). Next honours ctx
	// while it waits (rate limiting, a push feed with nothing pending).
	Next(ctx context.Context, max int) (arrow.RecordBatch, Position, error)
	// Lost is the number of records a forgetful source could not give back
	// when it was opened at a position behind what it had already handed
	// over: they are gone, and the engine reports them. Always 0 for a
	// re-readable source.
	Lost() int64
	Close() error
}

// ErrNotRereadable is wrapped by errors of callers that need a re-readable
// source for a guarantee they were asked to give.
var ErrNotRereadable = errors.New("source is not re-readable")
