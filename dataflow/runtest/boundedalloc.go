package runtest

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BoundedAlloc fails the test on any single allocation larger than Limit:
// a decoder fuzzed with it must never size memory from a length it has not
// checked against the bytes it was given.
type BoundedAlloc struct {
	memory.Allocator
	T     testing.TB
	Limit int
}

func (a BoundedAlloc) Allocate(n int) []byte {
	if n > a.Limit {
		a.T.Fatalf("allocation of %d bytes, limit %d", n, a.Limit)
	}
	return a.Allocator.Allocate(n)
}

func (a BoundedAlloc) Reallocate(n int, b []byte) []byte {
	if n > a.Limit {
		a.T.Fatalf("reallocation to %d bytes, limit %d", n, a.Limit)
	}
	return a.Allocator.Reallocate(n, b)
}
