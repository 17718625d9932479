package recordwise

import (
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// itemKind is what travels on a channel.
type itemKind uint8

const (
	// kData is a network buffer: a small Arrow batch.
	kData itemKind = iota
	// kWatermark promises no more rows below wm on this channel.
	kWatermark
	// kBarrier is the marker of checkpoint id.
	kBarrier
	// kCancel tells downstream that checkpoint id was given up upstream,
	// so it must not wait for its barrier.
	kCancel
	// kEnd ends the channel: every source is exhausted and the producer
	// has emitted everything.
	kEnd
)

// item is one element of a channel. A data item owns one reference to its
// batch; whoever holds the item releases it (or hands it on).
type item struct {
	kind  itemKind
	batch arrow.RecordBatch
	wm    int64
	id    checkpoint.ID
	// births are, for data, when sources handed over the rows the batch
	// derives from, in groups (for end-to-end latency).
	births []latEntry
	// born is, for a barrier, when the coordinator triggered the
	// checkpoint; for a watermark, when the rows that advanced it were
	// handed over.
	born time.Time
	// ready is when the item may be delivered (a modelled link delay);
	// zero means at once.
	ready time.Time
	// replay: the batch carries rows read again after a restore (set in
	// traced runs only, for the diagram).
	replay bool
}

// isMarker reports whether items of kind k are markers: they keep their
// order in a channel, and a priority barrier never overtakes them.
func (k itemKind) isMarker() bool { return k == kBarrier || k == kCancel || k == kEnd }

func (it item) release() {
	if it.batch != nil {
		it.batch.Release()
	}
}

// retained returns a copy of the item holding its own reference.
func (it item) retained() item {
	if it.batch != nil {
		it.batch.Retain()
	}
	return it
}

func (it item) rows() int {
	if it.batch == nil {
		return 0
	}
	return int(it.batch.NumRows())
}

// bytes is the size of the item's buffers (8 for a marker).
func (it item) bytes() int64 {
	if it.batch == nil {
		return 8
	}
	return batchBytes(it.batch)
}

func batchBytes(b arrow.RecordBatch) int64 {
	var n int64
	for _, c := range b.Columns() {
		for _, buf := range c.Data().Buffers() {
			if buf != nil {
				n += int64(buf.Len())
			}
		}
	}
	return n
}

// waker is a task's doorbell: anything that may let the task make progress
// rings it. One pending ring is enough, so it never blocks.
type waker chan struct{}

func newWaker() waker { return make(waker, 1) }

func (w waker) ring() {
	select {
	case w <- struct{}{}:
	default:
	}
}

// queue is one channel between a producing and a consuming subtask: a
// bounded FIFO of items, the equivalent of a network connection's buffers.
// A producer that finds it full keeps its output staged and stops taking
// input: that is backpressure. A barrier of an unaligned checkpoint may
// overtake the data and watermarks queued, never another marker
// (pushPriority).
type queue struct {
	mu       sync.Mutex
	items    []item
	head     int
	capacity int
	delay    time.Duration // modelled link latency (tests)
	consumer waker
	producer waker
}

func newQueue(capacity int, delay time.Duration, consumer, producer waker) *queue {
	return &queue{capacity: capacity, delay: delay, consumer: consumer, producer: producer}
}

func (q *queue) lenLocked() int { return len(q.items) - q.head }

// fullLocked reports whether the queue holds its capacity. On a delayed
// (modelled slow) link the items still in transit do not count: the link
// adds latency, not a bandwidth limit.
func (q *queue) fullLocked(now time.Time) bool {
	if q.delay <= 0 {
		return q.lenLocked() >= q.capacity
	}
	arrived := 0
	for _, x := range q.items[q.head:] {
		if x.ready.After(now) {
			break
		}
		arrived++
	}
	return arrived >= q.capacity
}

// tryPush appends it unless the queue is full.
func (q *queue) tryPush(it item, now time.Time) bool {
	q.mu.Lock()
	if q.fullLocked(now) {
		q.mu.Unlock()
		return false
	}
	if q.delay > 0 {
		it.ready = now.Add(q.delay)
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.consumer.ring()
	return true
}

// prefill appends items ignoring the capacity; used only before any task
// runs, to re-inject restored in-flight data.
func (q *queue) prefill(items []item) {
	q.mu.Lock()
	q.items = append(q.items, items...)
	q.mu.Unlock()
}

// pushPriority puts a barrier ahead of the data and watermarks queued,
// whatever the capacity, and returns retained copies of the items it
// overtook, in order: they now follow the barrier, so the producer persists
// them as its output channel state.
//
// It never overtakes a marker (barrier, cancel or end): markers keep their
// channel order, so barrier n+1 cannot reach the consumer before barrier n
// or the cancel of n, and nothing is put ahead of an end. The barrier goes
// right after the last queued marker, overtaking only what follows it.
func (q *queue) pushPriority(it item, now time.Time) []item {
	q.mu.Lock()
	if q.delay > 0 {
		it.ready = now.Add(q.delay)
	}
	at := q.head
	for i := len(q.items) - 1; i >= q.head; i-- {
		if q.items[i].kind.isMarker() {
			at = i + 1
			break
		}
	}
	var over []item
	for _, x := range q.items[at:] {
		over = append(over, x.retained())
	}
	if at == q.head && q.head > 0 {
		q.head--
		q.items[q.head] = it
	} else {
		q.items = slices.Insert(q.items, at, it)
	}
	q.mu.Unlock()
	q.consumer.ring()
	return over
}

// peek returns the head item if it may be delivered now. When the head is
// delayed it returns the time it becomes deliverable. It only looks: the
// head may change before the caller acts on it (a producer's pushPriority
// puts a barrier in front), so a consumer removes items with take.
func (q *queue) peek(now time.Time) (it item, ok bool, readyAt time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.headLocked(now)
}

func (q *queue) headLocked(now time.Time) (it item, ok bool, readyAt time.Time) {
	if q.lenLocked() == 0 {
		return item{}, false, time.Time{}
	}
	h := q.items[q.head]
	if !h.ready.IsZero() && h.ready.After(now) {
		return item{}, false, h.ready
	}
	return h, true, time.Time{}
}

// take removes and returns the head item if it may be delivered now and,
// when want is not nil, want accepts it. Looking at the head and removing
// it is one step under the lock: between a separate peek and pop the
// producer may put an overtaking barrier at the head, and the pop would
// then remove the barrier while the caller handles (and releases) the data
// item, which stays queued and is delivered again after its release. When
// the head is delayed it returns the time it becomes deliverable.
func (q *queue) take(now time.Time, want func(item) bool) (it item, ok bool, readyAt time.Time) {
	q.mu.Lock()
	it, ok, readyAt = q.headLocked(now)
	if !ok || (want != nil && !want(it)) {
		q.mu.Unlock()
		return item{}, false, readyAt
	}
	was := q.lenLocked()
	q.items[q.head] = item{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 64 && q.head*2 > len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.mu.Unlock()
	if was >= q.capacity {
		q.producer.ring()
	}
	return it, true, time.Time{}
}

// drain removes and returns everything queued (teardown).
func (q *queue) drain() []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := append([]item(nil), q.items[q.head:]...)
	q.items, q.head = nil, 0
	return out
}
