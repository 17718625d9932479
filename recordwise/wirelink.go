package recordwise

// This file holds a channel between two tasks in different processes
// (--workers process): the producer's task pushes into a local queue as
// it would for a task beside it, a sender pump moves the queue's items
// onto a wire data channel, and on the other side a receiver pump moves
// them into the consumer's local queue. The wire's credit is the
// consumer queue's capacity, so a slow consumer holds its producer back
// across the processes as it does inside one: what one link buffers is
// bounded by the two queues and the credit (3 × the channel's buffers,
// plus the one batch each pump holds).
//
// Markers keep their place: a wire channel's frames arrive in the order
// they were sent. An unaligned barrier overtakes only what is still in
// the producer's queue (pushPriority), never what the wire carries
// already; the receiver handles what it receives before the barrier as
// input that precedes it, which is what an aligned channel does, so the
// cut stays consistent.
//
// On the wire a batch is preceded by a marker frame with its hand-over
// times (births), so latency is measured end to end; watermarks,
// barriers and cancels are marker frames, and the end is the wire's end.
// Times travel as wall-clock nanoseconds: the processes share a clock
// on one machine (across machines, latency would include their skew).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// The marker frames' first byte.
const (
	wmBirths    = 1 // the next batch's births: replay u8, n u32, n × (born i64, rows i64)
	wmWatermark = 2 // wm i64, born i64
	wmBarrier   = 3 // id u64, born i64
	wmCancel    = 4 // id u64
)

// maxWireBirths bounds a births frame: a batch's births are few (one per
// source read it derives from), more is a broken peer.
const maxWireBirths = 1 << 16

var errLinkFrame = errors.New("recordwise link: malformed marker frame")

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// encodeMarker is the marker frame of a watermark, barrier or cancel item,
// or (kData) of a batch's births.
func encodeMarker(it item) []byte {
	le := binary.LittleEndian
	switch it.kind {
	case kData:
		b := make([]byte, 0, 6+16*len(it.births))
		b = append(b, wmBirths, 0)
		if it.replay {
			b[1] = 1
		}
		b = le.AppendUint32(b, uint32(len(it.births)))
		for _, e := range it.births {
			b = le.AppendUint64(b, uint64(nanos(e.born)))
			b = le.AppendUint64(b, uint64(e.rows))
		}
		return b
	case kWatermark:
		b := []byte{wmWatermark}
		b = le.AppendUint64(b, uint64(it.wm))
		return le.AppendUint64(b, uint64(nanos(it.born)))
	case kBarrier:
		b := []byte{wmBarrier}
		b = le.AppendUint64(b, uint64(it.id))
		return le.AppendUint64(b, uint64(nanos(it.born)))
	case kCancel:
		return le.AppendUint64([]byte{wmCancel}, uint64(it.id))
	}
	panic(fmt.Sprintf("recordwise link: no marker frame for item kind %d", it.kind))
}

// decodeMarker reads a marker frame. births says the frame announced a
// batch: the item then holds its births and replay flag, and the caller
// waits for the batch.
func decodeMarker(p []byte) (it item, births bool, err error) {
	le := binary.LittleEndian
	if len(p) == 0 {
		return item{}, false, errLinkFrame
	}
	body := p[1:]
	switch p[0] {
	case wmBirths:
		if len(body) < 5 || body[0] > 1 {
			return item{}, false, errLinkFrame
		}
		n := le.Uint32(body[1:5])
		if n > maxWireBirths || len(body) != 5+16*int(n) {
			return item{}, false, errLinkFrame
		}
		it = item{kind: kData, replay: body[0] == 1, births: make([]latEntry, n)}
		for i := range it.births {
			e := body[5+16*i:]
			rows := int64(le.Uint64(e[8:16]))
			if rows < 0 {
				return item{}, false, errLinkFrame
			}
			it.births[i] = latEntry{born: fromNanos(int64(le.Uint64(e[:8]))), rows: rows}
		}
		return it, true, nil
	case wmWatermark:
		if len(body) != 16 {
			return item{}, false, errLinkFrame
		}
		return item{kind: kWatermark, wm: int64(le.Uint64(body[:8])), born: fromNanos(int64(le.Uint64(body[8:])))}, false, nil
	case wmBarrier:
		if len(body) != 16 {
			return item{}, false, errLinkFrame
		}
		return item{kind: kBarrier, id: checkpoint.ID(le.Uint64(body[:8])), born: fromNanos(int64(le.Uint64(body[8:])))}, false, nil
	case wmCancel:
		if len(body) != 8 {
			return item{}, false, errLinkFrame
		}
		return item{kind: kCancel, id: checkpoint.ID(le.Uint64(body))}, false, nil
	}
	return item{}, false, errLinkFrame
}

// linkSender moves the items of a producer's local queue onto a wire
// data channel. q's consumer waker is wake.
type linkSender struct {
	q    *queue
	wake waker
	tx   *wire.Sender
}

// run sends until the channel's end is sent (nil) or ctx ends or the
// connection breaks (the error).
func (s *linkSender) run(ctx context.Context) error {
	for {
		it, ok, _ := s.q.take(time.Now(), nil)
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := s.send(ctx, it)
		it.release()
		if err != nil {
			return err
		}
		if it.kind == kEnd {
			return nil
		}
	}
}

func (s *linkSender) send(ctx context.Context, it item) error {
	switch it.kind {
	case kEnd:
		return s.tx.End(ctx)
	case kData:
		if err := s.tx.Barrier(ctx, encodeMarker(it)); err != nil {
			return err
		}
		return s.tx.Send(ctx, it.batch)
	}
	return s.tx.Barrier(ctx, encodeMarker(it))
}

// linkReceiver moves a wire data channel's items into a consumer's local
// queue, waiting while it is full. q's producer waker is wake.
type linkReceiver struct {
	q    *queue
	wake waker
	rx   *wire.Receiver
	rows *atomic.Int64 // counts the rows received, when set
}

// run receives until the channel's end is queued (nil), or ctx ends, the
// connection breaks or the peer sends what is not a channel's stream (the
// error).
func (r *linkReceiver) run(ctx context.Context) error {
	var next *item // births announced for the next batch
	for {
		wi, err := r.rx.Next(ctx)
		if err != nil {
			return err
		}
		var it item
		switch {
		case wi.End:
			if next != nil {
				return fmt.Errorf("%w: the end after births with no batch", errLinkFrame)
			}
			it = item{kind: kEnd}
		case wi.Batch != nil:
			if next == nil {
				wi.Batch.Release()
				return fmt.Errorf("%w: a batch without its births", errLinkFrame)
			}
			it, next = *next, nil
			it.batch = wi.Batch
			if r.rows != nil {
				r.rows.Add(wi.Batch.NumRows())
			}
		default:
			m, births, err := decodeMarker(wi.Barrier)
			if err != nil {
				return err
			}
			if next != nil {
				return fmt.Errorf("%w: births after births", errLinkFrame)
			}
			if births {
				next = &m
				continue
			}
			it = m
		}
		if err := r.push(ctx, it); err != nil {
			return err
		}
		if it.kind == kEnd {
			return nil
		}
	}
}

// push queues it once the queue has room; it owns it until then.
func (r *linkReceiver) push(ctx context.Context, it item) error {
	for !r.q.tryPush(it, time.Now()) {
		select {
		case <-r.wake:
		case <-ctx.Done():
			it.release()
			return ctx.Err()
		}
	}
	return nil
}
