// Package offheap holds large pointer-free arrays in memory mapped from
// the operating system instead of Go's heap.
//
// Why: Go's collector lets the heap grow to about twice what was live at
// its last collection before it collects again (GOGC=100). A keyed
// operator's hash table is most of a large state's live heap and lives as
// long as the run, so on the heap it costs its own size again in slack
// that the collector leaves for everything else. Mapped memory is not
// part of the heap: it counts once in the process's RSS, the collector
// neither scans nor paces on it, and freeing it returns it to the system
// at once. The price is an explicit Free; an Array that becomes
// unreachable without one is freed by a cleanup, so a missed Free leaks
// only until the next collection.
//
// Only types without pointers may be stored: the collector does not see
// this memory, so a pointer kept there would not keep its target alive.
package offheap

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"unsafe"
)

// MinBytes is the size below which an Array lives on Go's heap: a mapping
// takes whole pages and a system call, which small arrays do not repay.
const MinBytes = 64 << 10

// Array is a zeroed slice of n values of T, freed with Free.
type Array[T any] struct {
	// S is the array. It must not be used after Free.
	S       []T
	mapped  []byte
	cleanup runtime.Cleanup
}

// New returns an Array of n zero values of T. T must hold no pointers.
// Its pages are in memory when it returns: the callers fill their arrays
// right away, and one system call costs less than a fault per page. It
// panics when the system refuses the memory, as make does.
func New[T any](n int) *Array[T] {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	a := &Array[T]{}
	if size < MinBytes || !mappable {
		a.S = make([]T, n)
		return a
	}
	b, err := mapAnon(size)
	if err != nil {
		panic("offheap: mapping " + strconv.Itoa(size) + " bytes: " + err.Error())
	}
	a.mapped = b
	live.Add(int64(len(b)))
	a.S = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
	a.cleanup = runtime.AddCleanup(a, release, b)
	return a
}

// Free returns the array's memory. a.S is nil after it; calling Free
// again does nothing.
func (a *Array[T]) Free() {
	if a == nil {
		return
	}
	a.S = nil
	if a.mapped == nil {
		return
	}
	a.cleanup.Stop()
	b := a.mapped
	a.mapped = nil
	release(b)
}

func release(b []byte) {
	if err := unmap(b); err != nil {
		panic("offheap: unmapping: " + err.Error())
	}
	live.Add(-int64(len(b)))
}

// live is the bytes mapped now.
var live atomic.Int64

// Live returns the bytes of the Arrays mapped and not yet freed, so that
// tests can check that what they made is freed.
func Live() int64 { return live.Load() }

// Mapped reports whether a's memory is mapped (not on Go's heap).
func (a *Array[T]) Mapped() bool { return a.mapped != nil }
