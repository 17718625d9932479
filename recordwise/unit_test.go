package recordwise

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

func batchOf(alloc memory.Allocator, ids ...int64) item {
	cols := make([]arrow.Array, 4)
	for i := range cols {
		a, v := operator.AllocInt64(alloc, len(ids))
		copy(v, ids)
		cols[i] = a
	}
	return item{kind: kData, batch: operator.NewBatchOwning(source.Schema, len(ids), cols...)}
}

func idsOf(it item) []int64 {
	return append([]int64(nil), it.batch.Column(0).(*array.Int64).Int64Values()...)
}

// A priority barrier goes ahead of what is queued and hands back retained
// copies of the overtaken rows and watermarks, in order.
func TestQueuePriority(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	q := newQueue(2, 0, newWaker(), newWaker())
	now := time.Now()
	if !q.tryPush(batchOf(alloc, 1, 2), now) || !q.tryPush(item{kind: kWatermark, wm: 7}, now) {
		t.Fatal("push failed below capacity")
	}
	extra := batchOf(alloc, 3)
	if q.tryPush(extra, now) {
		t.Fatal("push beyond capacity accepted")
	}
	extra.release()
	over := q.pushPriority(item{kind: kBarrier, id: 5}, now)
	if len(over) != 2 || over[0].kind != kData || over[1].kind != kWatermark || over[1].wm != 7 {
		t.Fatalf("overtaken %+v", over)
	}
	for _, it := range over {
		it.release()
	}
	want := []itemKind{kBarrier, kData, kWatermark}
	for i, k := range want {
		it, ok, _ := q.take(now, nil)
		if !ok || it.kind != k {
			t.Fatalf("item %d: got %v ok=%v, want kind %d", i, it.kind, ok, k)
		}
		it.release()
	}
}

// A delayed queue delivers nothing before the delay, and items in transit
// do not count against the capacity.
func TestQueueDelay(t *testing.T) {
	q := newQueue(1, 50*time.Millisecond, newWaker(), newWaker())
	now := time.Now()
	if !q.tryPush(item{kind: kWatermark, wm: 1}, now) || !q.tryPush(item{kind: kWatermark, wm: 2}, now) {
		t.Fatal("items in transit counted against the capacity")
	}
	if _, ok, at := q.peek(now); ok || at.IsZero() {
		t.Fatal("delivered before the delay")
	}
	if it, ok, _ := q.peek(now.Add(60 * time.Millisecond)); !ok || it.wm != 1 {
		t.Fatal("not delivered after the delay")
	}
}

func TestChannelStateRoundTrip(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	streams := []chanStream{
		{dir: dirInput, channel: 3, items: []item{batchOf(alloc, 1, 2, 3), {kind: kWatermark, wm: 42}, batchOf(alloc, 4)}},
		{dir: dirOutput, channel: 0, items: []item{{kind: kWatermark, wm: -5}}},
	}
	var buf bytes.Buffer
	if err := encodeChannels(&buf, streams); err != nil {
		t.Fatal(err)
	}
	for _, s := range streams {
		for _, it := range s.items {
			it.release()
		}
	}
	got, err := decodeChannels(buf.Bytes(), alloc)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].channel != 3 || got[0].dir != dirInput || len(got[0].items) != 3 ||
		got[1].dir != dirOutput || len(got[1].items) != 1 || got[1].items[0].wm != -5 {
		t.Fatalf("decoded %+v", got)
	}
	if ids := idsOf(got[0].items[0]); len(ids) != 3 || ids[2] != 3 || got[0].items[1].wm != 42 || idsOf(got[0].items[2])[0] != 4 {
		t.Fatalf("decoded items wrong")
	}
	for _, s := range got {
		for _, it := range s.items {
			it.release()
		}
	}
	// Every truncation is rejected, and leaks nothing.
	for n := 0; n < buf.Len(); n += 7 {
		if out, err := decodeChannels(buf.Bytes()[:n], alloc); err == nil {
			t.Fatalf("truncated to %d bytes: decoded %v", n, out)
		}
	}
}

func TestPlanChains(t *testing.T) {
	want := map[string]string{
		"keyed-count":  "source[filter]>count | count[count]+sink",
		"windowed-sum": "source[filter]>window | window[window]+sink",
		"join":         "orders[]>join | payments[]>join | join[join]+sink",
		"etl":          "source[filter project]+sink",
	}
	for name, w := range want {
		j, err := job.Build(name, job.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := buildPlan(j, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for i, c := range pl.chains {
			if i > 0 {
				got += " | "
			}
			got += c.name + "["
			for k, o := range c.ops {
				if k > 0 {
					got += " "
				}
				got += o.ID
			}
			got += "]"
			if c.sink {
				got += "+sink"
			}
			for _, o := range c.outputs {
				got += ">" + o.to.name
			}
		}
		if got != w {
			t.Errorf("%s: chains %q, want %q", name, got, w)
		}
		if name == "join" {
			jc := pl.chains[2]
			if n := jc.inputChannels(3); n != 6 {
				t.Errorf("join task has %d input channels, want 6", n)
			}
			if port, from := jc.channelPort(4, 0, 3); port != 1 || from != 1 {
				t.Errorf("channel 4 is port %d from %d, want port 1 from subtask 1", port, from)
			}
		}
	}
}

// A consumer taking items while its producer puts overtaking barriers at
// the head of the channel gets every item exactly once: looking at the head
// and removing it is one step. (When they were two, a barrier pushed in
// between was removed in place of the data item the consumer had looked
// at, which was then processed, released, and delivered again.)
func TestQueueTakeRacesPriority(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	const rows, every = 20000, 5
	consumer, producer := newWaker(), newWaker()
	q := newQueue(4, 0, consumer, producer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		id := 0
		for i := int64(0); i < rows; i++ {
			it := batchOf(alloc, i)
			for !q.tryPush(it, time.Now()) {
				<-producer
			}
			if i%every == every-1 {
				id++
				for _, o := range q.pushPriority(item{kind: kBarrier, id: checkpoint.ID(id)}, time.Now()) {
					o.release()
				}
			}
		}
		for !q.tryPush(item{kind: kEnd}, time.Now()) {
			<-producer
		}
	}()
	next, barriers := int64(0), map[checkpoint.ID]bool{}
	for ended := false; !ended; {
		var it item
		var ok bool
		if next%3 == 0 {
			it, ok, _ = q.take(time.Now(), isMarker)
		}
		if !ok {
			it, ok, _ = q.take(time.Now(), nil)
		}
		if !ok {
			<-consumer
			continue
		}
		switch it.kind {
		case kData:
			if it.batch.NumCols() != 4 {
				t.Fatalf("row %d: delivered after its release", next)
			}
			if got := idsOf(it)[0]; got != next {
				t.Fatalf("got row %d, want %d", got, next)
			}
			next++
		case kBarrier:
			if barriers[it.id] {
				t.Fatalf("barrier %d delivered twice", it.id)
			}
			barriers[it.id] = true
		case kEnd:
			ended = true
		}
		it.release()
	}
	<-done
	if next != rows || len(barriers) != rows/every {
		t.Fatalf("got %d rows and %d barriers, want %d and %d", next, len(barriers), rows, rows/every)
	}
}

// A priority barrier overtakes data and watermarks but never a marker:
// barrier n+1 cannot reach the consumer ahead of barrier n or the cancel
// of n, and nothing goes ahead of an end. Whatever it overtook is handed
// back, and only that.
func TestQueuePriorityKeepsMarkerOrder(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	type step struct {
		kind itemKind
		id   checkpoint.ID
	}
	cases := []struct {
		name   string
		queued []step
		want   []step // delivery order after the priority barrier 9
		over   int    // items it overtook
	}{
		{"barrier behind data", []step{{kData, 0}, {kBarrier, 1}, {kData, 0}},
			[]step{{kData, 0}, {kBarrier, 1}, {kBarrier, 9}, {kData, 0}}, 1},
		{"two barriers", []step{{kBarrier, 1}, {kData, 0}, {kBarrier, 2}, {kWatermark, 0}, {kData, 0}},
			[]step{{kBarrier, 1}, {kData, 0}, {kBarrier, 2}, {kBarrier, 9}, {kWatermark, 0}, {kData, 0}}, 2},
		{"cancel", []step{{kData, 0}, {kCancel, 1}, {kData, 0}},
			[]step{{kData, 0}, {kCancel, 1}, {kBarrier, 9}, {kData, 0}}, 1},
		{"end", []step{{kData, 0}, {kEnd, 0}},
			[]step{{kData, 0}, {kEnd, 0}, {kBarrier, 9}}, 0},
		{"marker at the tail", []step{{kData, 0}, {kBarrier, 1}},
			[]step{{kData, 0}, {kBarrier, 1}, {kBarrier, 9}}, 0},
		{"no marker", []step{{kData, 0}, {kData, 0}},
			[]step{{kBarrier, 9}, {kData, 0}, {kData, 0}}, 2},
	}
	for _, tc := range cases {
		for _, taken := range []int{0, 1} { // with the queue's head moved on
			q := newQueue(100, 0, newWaker(), newWaker())
			now := time.Now()
			for i := 0; i < taken; i++ {
				q.tryPush(batchOf(alloc, -1), now)
			}
			for i := 0; i < taken; i++ {
				it, _, _ := q.take(now, nil)
				it.release()
			}
			for _, s := range tc.queued {
				it := item{kind: s.kind, id: s.id}
				if s.kind == kData {
					it = batchOf(alloc, 1)
				}
				q.tryPush(it, now)
			}
			over := q.pushPriority(item{kind: kBarrier, id: 9}, now)
			if len(over) != tc.over {
				t.Errorf("%s: overtook %d items, want %d", tc.name, len(over), tc.over)
			}
			for _, o := range over {
				if o.kind.isMarker() {
					t.Errorf("%s: overtook a marker %v", tc.name, o.kind)
				}
				o.release()
			}
			for i, w := range tc.want {
				it, ok, _ := q.take(now, nil)
				if !ok || it.kind != w.kind || it.id != w.id {
					t.Errorf("%s: item %d is kind %d id %d (ok=%v), want kind %d id %d", tc.name, i, it.kind, it.id, ok, w.kind, w.id)
				}
				it.release()
			}
			for _, it := range q.drain() {
				t.Errorf("%s: left over kind %d", tc.name, it.kind)
				it.release()
			}
		}
	}
}

// A router's unaligned barrier does not overtake a marker still staged
// (waiting for room in a full channel) either: it is staged right after it,
// and only the staged items behind it are its output channel state.
func TestRouterBarrierBehindStagedMarker(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	q := newQueue(1, 0, newWaker(), newWaker())
	r := newRouter(alloc, source.Schema, 1024, time.Millisecond, 1)
	r.addEdge(job.Forward, 0, []*queue{q})
	now := time.Now()
	oc := r.outs[0]
	oc.stage(batchOf(alloc, 1))
	oc.stage(item{kind: kBarrier, id: 1})
	oc.stage(batchOf(alloc, 2))
	r.drain(now) // the channel takes row 1 and is full
	r.cancel(1)
	oc.stage(batchOf(alloc, 3))
	state := r.barrier(2, now, now, true)
	if len(state) != 1 || len(state[0]) != 1 || idsOf(state[0][0])[0] != 3 {
		t.Fatalf("output channel state %v, want row 3 alone", state)
	}
	state[0][0].release()
	var got []string
	for {
		r.drain(now)
		it, ok, _ := q.take(now, nil)
		if !ok {
			break
		}
		switch it.kind {
		case kData:
			got = append(got, fmt.Sprintf("row%d", idsOf(it)[0]))
		case kBarrier:
			got = append(got, fmt.Sprintf("barrier%d", it.id))
		case kCancel:
			got = append(got, fmt.Sprintf("cancel%d", it.id))
		}
		it.release()
	}
	want := "[row1 barrier1 row2 cancel1 barrier2 row3]"
	if fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
}
