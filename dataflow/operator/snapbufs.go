package operator

import (
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/offheap"
)

// snapBuffers is the allocator of the keyed aggregation's snapshot
// batches. When the consumer of a snapshot releases its batches, their
// memory comes back here and the next Snapshot writes into it instead of
// asking parent for new memory: fresh memory from the Go heap is cleared
// first (a full extra write of the state) and, once the runtime has
// returned it to the OS, page-faulted back in. Snapshots repeat every
// recovery point, so after the first one a snapshot allocates nothing.
//
// The price is memory: between snapshots it keeps up to one snapshot's
// worth (keep bytes). Memory it hands out is not cleared: the caller must
// write every byte it uses, as compact does. Buffers are released from
// whichever goroutine encodes the snapshot, hence the mutex.
//
// Buffers of offheap.MinBytes or more are mapped (package offheap) rather
// than taken from parent, and are not kept: unmapped as soon as they are
// released. For a large state the copy kept between recovery points
// would be a whole state held idle for the run (on Go's heap, twice
// that with the collector's slack), and an encoder that releases the
// snapshot as it encodes it (state.EncodeAllTo) then holds the snapshot
// and its blob in about one copy's memory. The price is fresh pages at
// every snapshot of a large state. Smaller buffers, and so every buffer
// of a small state, come from parent and are kept as above.
type snapBuffers struct {
	parent memory.Allocator

	mu     sync.Mutex
	free   [][]byte // as parent returned them
	held   int      // bytes in free
	keep   int      // most bytes free may hold
	closed bool
	// mapped holds the mapped buffers handed out, by first byte. A
	// Buffer refers to its allocator, so a buffer still in use keeps this
	// map, and with it the mapping, alive.
	mapped map[*byte]*offheap.Array[byte]
}

func newSnapBuffers(parent memory.Allocator) *snapBuffers {
	return &snapBuffers{parent: parent}
}

// setKeep bounds the memory kept for the next snapshot; Snapshot sets it
// to the size of the snapshot it is taking.
func (s *snapBuffers) setKeep(n int) {
	s.mu.Lock()
	s.keep = n
	s.mu.Unlock()
}

// Allocate returns the smallest kept buffer of at least size bytes, not
// cleared, or new memory from parent. It returns the kept buffer whole:
// memory.Buffer uses only the length it asked for and hands the whole
// slice back to Free, which is what parent needs to get back.
func (s *snapBuffers) Allocate(size int) []byte {
	s.mu.Lock()
	best := -1
	for i, b := range s.free {
		if len(b) >= size && (best < 0 || len(b) < len(s.free[best])) {
			best = i
			if len(b)-size < 64 {
				break // as good as it gets: Buffer rounds sizes to 64
			}
		}
	}
	if best >= 0 {
		b := s.free[best]
		last := len(s.free) - 1
		s.free[best], s.free[last] = s.free[last], nil
		s.free = s.free[:last]
		s.held -= len(b)
		s.mu.Unlock()
		return b
	}
	if size < offheap.MinBytes {
		s.mu.Unlock()
		return s.parent.Allocate(size)
	}
	m := offheap.New[byte](size)
	if s.mapped == nil {
		s.mapped = map[*byte]*offheap.Array[byte]{}
	}
	s.mapped[unsafe.SliceData(m.S)] = m
	s.mu.Unlock()
	return m.S
}

func (s *snapBuffers) Reallocate(size int, b []byte) []byte {
	if size <= len(b) {
		return b
	}
	nb := s.Allocate(size)
	copy(nb, b)
	s.Free(b)
	return nb
}

// Free keeps b for the next snapshot, or returns it to parent when the
// operator is closed or enough is kept already.
func (s *snapBuffers) Free(b []byte) {
	s.mu.Lock()
	if b = s.freeMappedLocked(b); b != nil && !s.closed && s.held+len(b) <= s.keep {
		s.free = append(s.free, b)
		s.held += len(b)
		b = nil
	}
	s.mu.Unlock()
	if b != nil {
		s.parent.Free(b)
	}
}

// freeMappedLocked unmaps b if it is a mapped buffer and returns nil, or
// returns b, parent's.
func (s *snapBuffers) freeMappedLocked(b []byte) []byte {
	if m := s.mapped[unsafe.SliceData(b)]; m != nil {
		delete(s.mapped, unsafe.SliceData(b))
		m.Free()
		return nil
	}
	return b
}

// close returns the kept memory to parent; buffers released later go
// straight back to parent.
func (s *snapBuffers) close() {
	s.mu.Lock()
	free := s.free // never mapped ones: those are not kept
	s.free, s.held, s.closed = nil, 0, true
	s.mu.Unlock()
	for _, b := range free {
		s.parent.Free(b)
	}
}
