// Package storage is durable shared storage: the place outside every worker
// where recovery points, logs and ledgers live. A crashed worker loses
// everything except what is here and the re-readable input.
//
// Two implementations share one contract and one test suite: a local
// directory (the embedded default, file://./rewind-data) and any
// S3-compatible store through minio-go (s3://bucket/prefix).
//
// The contract:
//   - Put publishes an object atomically: a reader sees the whole new object
//     or the previous state, never a prefix (write-then-rename locally, a
//     single-object PUT on S3).
//   - Every object carries a checksum written by Put and verified by Get: a
//     torn, truncated or corrupted object is reported as ErrCorrupt, never
//     returned.
//   - Names are slash-separated relative paths ("chk/7/op-2/kg-13").
package storage

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by Get for a missing object.
var ErrNotFound = errors.New("object not found")

// ErrCorrupt is returned by Get when an object fails its checksum, is
// truncated, or lacks the trailer Put writes.
var ErrCorrupt = errors.New("object is corrupt")

// ErrUnreachable wraps failures to reach the storage service at all.
var ErrUnreachable = errors.New("storage unreachable")

// Object describes a stored object.
type Object struct {
	Name    string
	Size    int64 // payload bytes, excluding the checksum trailer
	ModTime time.Time
}

// Store is durable shared storage.
type Store interface {
	// Put atomically publishes data under name, replacing any previous
	// object.
	Put(ctx context.Context, name string, data []byte) error
	// Get returns the payload of name after verifying its checksum.
	Get(ctx context.Context, name string) ([]byte, error)
	// List returns the objects whose names start with prefix, sorted by name.
	// Objects in the middle of being written are never listed.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes name; deleting a missing object is not an error.
	Delete(ctx context.Context, name string) error
	// URL is the location the store was opened from.
	URL() string
	Close() error
}
