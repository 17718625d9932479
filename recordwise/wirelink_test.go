package recordwise

import (
	"bytes"
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/testseed"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

var linkSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// testLink is one cross-process channel over a loopback connection: the
// producer's queue, the consumer's queue and both pumps running.
type testLink struct {
	prod, cons          *queue
	prodWake, consWake  waker
	sent, received      chan error
	sendAlloc, rcvAlloc *memory.CheckedAllocator
}

func newTestLink(t *testing.T, capacity int) *testLink {
	t.Helper()
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l := &testLink{sendAlloc: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		rcvAlloc: memory.NewCheckedAllocator(memory.NewGoAllocator()),
		prodWake: newWaker(), consWake: newWaker(), sent: make(chan error, 1), received: make(chan error, 1)}
	quiet := func(string, ...any) {}
	ln, err := wire.Listen("", wire.ListenConfig{Token: token, Conn: wire.Options{Alloc: l.rcvAlloc, Log: quiet},
		Welcome: func(wire.Hello) (wire.Welcome, error) { return wire.Welcome{Config: []byte("{}")}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	snd, _, err := wire.Dial(ctx, ln.Addr(), wire.Hello{Token: token, Worker: "0"}, wire.Options{Alloc: l.sendAlloc, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rcv, _, err := ln.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rx, err := rcv.OpenReceiver(7, linkSchema, capacity)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := snd.OpenSender(7, linkSchema, l.sendAlloc)
	if err != nil {
		t.Fatal(err)
	}
	sendWake, rcvWake := newWaker(), newWaker()
	l.prod = newQueue(capacity, 0, sendWake, l.prodWake)
	l.cons = newQueue(capacity, 0, l.consWake, rcvWake)
	go func() { l.sent <- (&linkSender{q: l.prod, wake: sendWake, tx: tx}).run(ctx) }()
	go func() { l.received <- (&linkReceiver{q: l.cons, wake: rcvWake, rx: rx}).run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-l.sent
		<-l.received
		for _, q := range []*queue{l.prod, l.cons} {
			for _, it := range q.drain() {
				it.release()
			}
		}
		rx.Close()
		_ = snd.Close()
		_ = rcv.Close()
		_ = ln.Close()
		<-snd.Done()
		<-rcv.Done()
		l.sendAlloc.AssertSize(t, 0)
		l.rcvAlloc.AssertSize(t, 0)
	})
	return l
}

// push queues it at the producer, waiting while its queue is full. It
// runs on the producer's goroutine, so it reports with t.Error.
func (l *testLink) push(t *testing.T, it item) bool {
	deadline := time.After(10 * time.Second)
	for !l.prod.tryPush(it, time.Now()) {
		select {
		case <-l.prodWake:
		case <-deadline:
			it.release()
			t.Error("the producer's queue never had room")
			return false
		}
	}
	return true
}

// take waits for the consumer's next item.
func (l *testLink) take(t *testing.T) item {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if it, ok, _ := l.cons.take(time.Now(), nil); ok {
			return it
		}
		select {
		case <-l.consWake:
		case <-deadline:
			t.Fatal("nothing arrived at the consumer")
		}
	}
}

func linkBatch(alloc memory.Allocator, rng *rand.Rand) arrow.RecordBatch {
	b := array.NewRecordBuilder(alloc, linkSchema)
	defer b.Release()
	for range 1 + rng.IntN(40) {
		b.Field(0).(*array.Int64Builder).Append(rng.Int64())
		b.Field(1).(*array.Int64Builder).Append(rng.Int64())
	}
	return b.NewRecordBatch()
}

// randomItems are n seeded items of every kind but the end, then the end.
func randomItems(alloc memory.Allocator, rng *rand.Rand, n int) []item {
	var out []item
	born := func() time.Time {
		if rng.IntN(5) == 0 {
			return time.Time{}
		}
		return time.Unix(0, rng.Int64N(1<<62))
	}
	for range n {
		switch k := rng.IntN(10); {
		case k < 6:
			it := item{kind: kData, batch: linkBatch(alloc, rng), replay: rng.IntN(4) == 0}
			for range rng.IntN(4) {
				it.births = append(it.births, latEntry{born: born(), rows: rng.Int64N(1000)})
			}
			out = append(out, it)
		case k < 8:
			out = append(out, item{kind: kWatermark, wm: rng.Int64() - 1<<62, born: born()})
		case k < 9:
			out = append(out, item{kind: kBarrier, id: checkpoint.ID(rng.Uint64()), born: born()})
		default:
			out = append(out, item{kind: kCancel, id: checkpoint.ID(rng.Uint64())})
		}
	}
	return append(out, item{kind: kEnd})
}

// sameItem says got is want by value: kind, marker fields, births and rows.
func sameItem(got, want item) bool {
	if got.kind != want.kind || got.wm != want.wm || got.id != want.id || !got.born.Equal(want.born) || got.replay != want.replay ||
		len(got.births) != len(want.births) {
		return false
	}
	for i := range got.births {
		if !got.births[i].born.Equal(want.births[i].born) || got.births[i].rows != want.births[i].rows {
			return false
		}
	}
	if (got.batch == nil) != (want.batch == nil) {
		return false
	}
	return got.batch == nil || array.RecordEqual(got.batch, want.batch)
}

// TestLinkKeepsOrderAndValues: seeded items of every kind cross a link in
// their order and arrive equal by value, batches with their births.
func TestLinkKeepsOrderAndValues(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	l := newTestLink(t, 1+rng.IntN(4))
	want := randomItems(l.sendAlloc, rng, 300)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, it := range want {
			if !l.push(t, it.retained()) {
				return
			}
		}
	}()
	for i, w := range want {
		got := l.take(t)
		if !sameItem(got, w) {
			t.Fatalf("item %d: got kind %d (wm %d id %d births %v), want kind %d (wm %d id %d births %v)",
				i, got.kind, got.wm, got.id, got.births, w.kind, w.wm, w.id, w.births)
		}
		got.release()
	}
	<-done
	for _, w := range want {
		w.release()
	}
	if err := <-l.sent; err != nil {
		t.Fatalf("sender: %v", err)
	}
	l.sent <- nil // for the cleanup
	if err := <-l.received; err != nil {
		t.Fatalf("receiver: %v", err)
	}
	l.received <- nil
}

// TestLinkBackpressuresAcrossProcesses: with the consumer taking nothing,
// the producer is held back once the link's bound is buffered; an
// unaligned barrier then overtakes what the producer's queue still holds,
// and only that; once the consumer takes again, everything arrives, the
// barrier right after what had crossed already.
func TestLinkBackpressuresAcrossProcesses(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	const capacity = 3
	l := newTestLink(t, capacity)
	var pushed []item
	for {
		it := item{kind: kData, batch: linkBatch(l.sendAlloc, rng)}
		mine := it.retained() // before the push: the pumps may release theirs at once
		if !l.prod.tryPush(it, time.Now()) {
			// Full now; give the pumps time to move what they can.
			settled := false
			for range 100 { // a second without room: the link holds all it can
				time.Sleep(10 * time.Millisecond)
				if l.prod.tryPush(it, time.Now()) {
					settled = false
					break
				}
				settled = true
			}
			if settled {
				it.release()
				mine.release()
				break
			}
		}
		pushed = append(pushed, mine)
		if len(pushed) > 100 {
			t.Fatalf("the producer pushed %d batches into a stalled link of capacity %d", len(pushed), capacity)
		}
	}
	// Two queues and the credit, plus the batch each pump may hold.
	if bound := 3*capacity + 2; len(pushed) > bound || len(pushed) < 2*capacity {
		t.Fatalf("a stalled link took %d batches, want %d..%d", len(pushed), 2*capacity, bound)
	}
	over := l.prod.pushPriority(item{kind: kBarrier, id: 9}, time.Now())
	if len(over) == 0 || len(over) > capacity {
		t.Fatalf("the barrier overtook %d items, want 1..%d (what the producer's queue held)", len(over), capacity)
	}
	crossed := len(pushed) - len(over)
	for i, it := range over {
		if !array.RecordEqual(it.batch, pushed[crossed+i].batch) {
			t.Fatalf("overtaken item %d is not the producer's queued batch %d", i, crossed+i)
		}
		it.release()
	}
	ended := make(chan struct{})
	go func() { // the producer's queue is over its capacity now: the end waits for room
		defer close(ended)
		_ = l.push(t, item{kind: kEnd})
	}()
	defer func() { <-ended }()
	order := slices.Concat(pushed[:crossed], []item{{kind: kBarrier, id: 9}}, pushed[crossed:], []item{{kind: kEnd}})
	for i, w := range order {
		got := l.take(t)
		if !sameItem(got, w) {
			t.Fatalf("item %d after the stall: kind %d, want %d (%d had crossed before the barrier)", i, got.kind, w.kind, crossed)
		}
		got.release()
	}
	for _, it := range pushed {
		it.release()
	}
}

// TestLinkMarkerFrames: every marker frame decodes to what was encoded;
// every truncation, extension and unknown kind is refused, never a panic.
func TestLinkMarkerFrames(t *testing.T) {
	for _, it := range []item{
		{kind: kData, births: []latEntry{{born: time.Unix(0, 5), rows: 3}}, replay: true},
		{kind: kData},
		{kind: kWatermark, wm: -7, born: time.Unix(0, 99)},
		{kind: kBarrier, id: 12},
		{kind: kCancel, id: 1 << 40},
	} {
		b := encodeMarker(it)
		got, births, err := decodeMarker(b)
		if err != nil || births != (it.kind == kData) || !sameItem(got, it) {
			t.Fatalf("kind %d: decoded %+v, %v, %v", it.kind, got, births, err)
		}
		for n := range len(b) {
			if _, _, err := decodeMarker(b[:n]); err == nil {
				t.Fatalf("kind %d: a frame cut to %d of %d bytes decoded", it.kind, n, len(b))
			}
		}
		if _, _, err := decodeMarker(append(bytes.Clone(b), 0)); err == nil {
			t.Fatalf("kind %d: a frame with a byte more decoded", it.kind)
		}
	}
	if _, _, err := decodeMarker([]byte{9, 0, 0}); err == nil {
		t.Fatal("an unknown marker kind decoded")
	}
}

// FuzzLinkMarker: no frame panics the decoder, and one it accepts
// encodes back to itself.
func FuzzLinkMarker(f *testing.F) {
	f.Add(encodeMarker(item{kind: kData, births: []latEntry{{born: time.Unix(0, 5), rows: 3}}}))
	f.Add(encodeMarker(item{kind: kWatermark, wm: 3}))
	f.Add(encodeMarker(item{kind: kBarrier, id: 2}))
	f.Add(encodeMarker(item{kind: kCancel, id: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		it, _, err := decodeMarker(b)
		if err != nil {
			return
		}
		if again := encodeMarker(it); !bytes.Equal(again, b) {
			t.Fatalf("%x decoded, and encodes back to %x", b, again)
		}
	})
}
