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
	"sync"
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
	b := reuse(size)
	var err error
	if b == nil {
		b, err = mapAnon(size)
	}
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

// Recycle is Free for an array whose size is likely to be asked for again
// soon: a state's tables when its operator closes, which an operator
// restoring the same state rebuilds at once. Its mapping is kept, up to
// KeepBytes in all, for the next New of the same size, and unmapped at the
// next garbage collection if none came; New clears it.
//
// Why: a new mapping costs the kernel a fault and a cleared page per
// 4 KiB, 3 µs a page on this project's VM, where Go's heap reuses memory
// it holds. Restoring 1 M keys into fresh mappings took 31 to 56 ms
// against 19 to 22 ms on the heap (BenchmarkRestoreDecode); kept ones are
// cleared in user space.
func (a *Array[T]) Recycle() {
	if a == nil || a.mapped == nil {
		a.Free()
		return
	}
	a.S = nil
	a.cleanup.Stop()
	b := a.mapped
	a.mapped = nil
	live.Add(-int64(len(b)))
	if !keep(b) {
		if err := unmap(b); err != nil {
			panic("offheap: unmapping: " + err.Error())
		}
	}
}

// KeepBytes bounds the mappings Recycle keeps.
const KeepBytes = 256 << 20

var kept struct {
	sync.Mutex
	bySize map[int][][]byte
	bytes  int
}

// keep holds b for reuse unless KeepBytes are kept already.
func keep(b []byte) bool {
	kept.Lock()
	defer kept.Unlock()
	if kept.bytes+len(b) > KeepBytes {
		return false
	}
	if kept.bySize == nil {
		kept.bySize = map[int][][]byte{}
		armUnmapKept()
	}
	kept.bySize[len(b)] = append(kept.bySize[len(b)], b)
	kept.bytes += len(b)
	return true
}

// reuse returns a kept mapping of size bytes, cleared, or nil.
func reuse(size int) []byte {
	kept.Lock()
	l := kept.bySize[size]
	if len(l) == 0 {
		kept.Unlock()
		return nil
	}
	b := l[len(l)-1]
	kept.bySize[size] = l[:len(l)-1]
	kept.bytes -= size
	kept.Unlock()
	clear(b)
	return b
}

// armUnmapKept has the next garbage collection unmap what is kept (and
// arm itself again), so memory nobody asked for back is held idle no
// longer than one collection cycle, as sync.Pool's.
func armUnmapKept() {
	// Not a tiny object: those share a block, whose cleanups wait for all.
	runtime.AddCleanup(new([2]*byte), func(struct{}) { unmapKept() }, struct{}{})
}

func unmapKept() {
	kept.Lock()
	all := kept.bySize
	kept.bySize, kept.bytes = nil, 0
	kept.Unlock()
	for _, l := range all {
		for _, b := range l {
			if err := unmap(b); err != nil {
				panic("offheap: unmapping: " + err.Error())
			}
		}
	}
}

// live is the bytes mapped now.
var live atomic.Int64

// Live returns the bytes of the Arrays mapped and not yet freed, so that
// tests can check that what they made is freed.
func Live() int64 { return live.Load() }

// Mapped reports whether a's memory is mapped (not on Go's heap).
func (a *Array[T]) Mapped() bool { return a.mapped != nil }
