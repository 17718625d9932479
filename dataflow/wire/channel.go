package wire

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Data channels carry one stream of record batches, with barriers in
// their place between them, from a Sender on one side to a Receiver on the
// other, many channels over one connection. Flow control is by credit, as
// in Flink's network stack: the receiver grants as many batches as its
// bounded queue holds, and one more each time its consumer takes one; a
// sender without credit waits. So a slow consumer slows its producer
// without blocking the connection's other channels, and a receiver's
// memory is bounded by its capacity. Barriers and the end take no credit:
// they are small, and they keep their place behind the batches sent
// before them because one channel's frames are written in order.
//
// The receiver opens a channel first (its first credit is the signal);
// a sender waits for it before sending anything.

// maxCredit bounds the credit a sender may hold: more is a broken peer.
const maxCredit = 1 << 16

// senderState is a channel's credit, which may arrive before the sender
// is opened.
type senderState struct {
	credits chan struct{}
	opened  chan struct{}
	once    sync.Once
}

func (c *Conn) sender(channel uint32) *senderState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.senders[channel]
	if s == nil {
		s = &senderState{credits: make(chan struct{}, maxCredit), opened: make(chan struct{})}
		c.senders[channel] = s
	}
	return s
}

func (s *senderState) grant(n int) error {
	s.once.Do(func() { close(s.opened) })
	for i := 0; i < n; i++ {
		select {
		case s.credits <- struct{}{}:
		default:
			return fmt.Errorf("%w: credit beyond %d batches", ErrMalformed, maxCredit)
		}
	}
	return nil
}

// Sender sends one channel's batches. Not safe for concurrent use.
type Sender struct {
	c       *Conn
	channel uint32
	st      *senderState
	pw      *payloadWriter
	w       *ipc.Writer
	ended   bool
}

// OpenSender opens the sending end of channel for batches of schema.
func (c *Conn) OpenSender(channel uint32, schema *arrow.Schema, alloc memory.Allocator) (*Sender, error) {
	if err := checkSchema(schema); err != nil {
		return nil, err
	}
	if alloc == nil {
		alloc = memory.DefaultAllocator
	}
	s := &Sender{c: c, channel: channel, st: c.sender(channel)}
	s.pw = &payloadWriter{send: func(kind Kind, n int, body func(io.Writer) error) error {
		return c.writeStreamed(kind, channel, n, body)
	}}
	s.w = ipc.NewWriterWithPayloadWriter(s.pw, ipc.WithSchema(schema), ipc.WithAllocator(alloc))
	return s, nil
}

func (s *Sender) waitOpen(ctx context.Context) error {
	select {
	case <-s.st.opened:
		return nil
	case <-s.c.done:
		return s.c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Send sends one batch, waiting for credit. The batch is borrowed: it is
// encoded before Send returns.
func (s *Sender) Send(ctx context.Context, rec arrow.RecordBatch) error {
	if s.ended {
		return fmt.Errorf("wire: send on channel %d after its end", s.channel)
	}
	select {
	case <-s.st.credits:
	case <-s.c.done:
		return s.c.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.w.Write(rec)
}

// Barrier sends a barrier, after every batch sent before it.
func (s *Sender) Barrier(ctx context.Context, payload []byte) error {
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	return s.c.write(KindBarrier, s.channel, payload)
}

// End says no more batches follow and releases the encoder.
func (s *Sender) End(ctx context.Context) error {
	if s.ended {
		return nil
	}
	s.ended = true
	_ = s.w.Close()
	if err := s.waitOpen(ctx); err != nil {
		return err
	}
	return s.c.write(KindEnd, s.channel)
}

// Abandon releases the encoder without ending the channel, and sends
// nothing more: for a stream cut short (its producer failed, or its link
// is being replaced), where an end would tell the receiver that what it
// got is the whole stream.
func (s *Sender) Abandon() {
	if s.ended {
		return
	}
	s.ended = true
	s.pw.send = func(Kind, int, func(io.Writer) error) error { return nil }
	_ = s.w.Close()
}

// Item is what a receiver delivers: a batch (the caller owns it and
// releases it), a barrier's payload, or the end.
type Item struct {
	Batch   arrow.RecordBatch
	Barrier []byte
	End     bool
}

// Receiver receives one channel. Next is for one consumer goroutine.
type Receiver struct {
	c        *Conn
	channel  uint32
	capacity int
	dec      batchDecoder // used by the read loop only

	mu     sync.Mutex
	queue  []Item
	credit int // batches the sender may still send
	closed bool
	ready  chan struct{}
}

// OpenReceiver opens the receiving end of channel with room for capacity
// batches (the bound on what it buffers), and grants that credit. schema,
// when not nil, is what the sender must send; another is refused.
func (c *Conn) OpenReceiver(channel uint32, schema *arrow.Schema, capacity int) (*Receiver, error) {
	if capacity <= 0 || capacity > maxCredit {
		return nil, fmt.Errorf("wire: receiver capacity %d; allowed 1..%d", capacity, maxCredit)
	}
	r := &Receiver{c: c, channel: channel, capacity: capacity, ready: make(chan struct{}, 1), credit: capacity,
		dec: batchDecoder{alloc: c.opts.Alloc, schema: schema}}
	c.mu.Lock()
	if c.receivers[channel] != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("wire: channel %d is already open", channel)
	}
	c.receivers[channel] = r // the read loop may deliver to it from here on
	c.mu.Unlock()
	if err := c.write(KindCredit, channel, credit(capacity)); err != nil {
		return nil, err
	}
	return r, nil
}

func credit(n int) []byte {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(n))
	return b[:]
}

// receive handles one data frame, on the read loop.
func (r *Receiver) receive(h Header) error {
	switch h.Kind {
	case KindBarrier:
		p, err := r.c.r.Payload()
		if err != nil {
			return err
		}
		return r.push(Item{Barrier: p}, false)
	case KindEnd:
		if _, err := r.c.r.Payload(); err != nil {
			return err
		}
		// Nothing follows: the decoder's last message goes now, not when
		// the connection closes.
		r.dec.release()
		return r.push(Item{End: true}, false)
	}
	buf := memory.NewResizableBuffer(r.c.opts.Alloc)
	defer buf.Release()
	buf.Resize(int(h.Length))
	if err := r.c.r.ReadPayloadInto(buf.Bytes()); err != nil {
		return err
	}
	msg, typ, err := decodeMessage(buf)
	if err != nil {
		return err
	}
	if h.Kind == KindSchema {
		if err := r.dec.schemaMessage(msg, typ); err != nil {
			return fmt.Errorf("channel %d: %w", r.channel, err)
		}
		return nil
	}
	rec, err := r.dec.batchMessage(msg, typ)
	if err != nil {
		return fmt.Errorf("channel %d: %w", r.channel, err)
	}
	if err := r.push(Item{Batch: rec}, true); err != nil {
		rec.Release()
		return err
	}
	return nil
}

func (r *Receiver) push(it Item, batch bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if batch {
		if r.credit == 0 {
			return fmt.Errorf("%w: channel %d sent a batch beyond its credit", ErrMalformed, r.channel)
		}
		r.credit--
	}
	if r.closed {
		if it.Batch != nil {
			it.Batch.Release()
		}
		return nil
	}
	r.queue = append(r.queue, it)
	select {
	case r.ready <- struct{}{}:
	default:
	}
	return nil
}

// Next returns the next item in the order it was sent. What arrived
// before the connection broke is delivered first; then the connection's
// error.
func (r *Receiver) Next(ctx context.Context) (Item, error) {
	for {
		r.mu.Lock()
		if len(r.queue) > 0 {
			it := r.queue[0]
			r.queue[0] = Item{}
			r.queue = r.queue[1:]
			if it.Batch != nil {
				r.credit++
			}
			r.mu.Unlock()
			if it.Batch != nil {
				if err := r.c.write(KindCredit, r.channel, credit(1)); err != nil {
					it.Batch.Release()
					return Item{}, err
				}
			}
			return it, nil
		}
		r.mu.Unlock()
		select {
		case <-r.ready:
		case <-r.c.done:
			r.mu.Lock()
			empty := len(r.queue) == 0
			r.mu.Unlock()
			if empty {
				return Item{}, r.c.Err()
			}
		case <-ctx.Done():
			return Item{}, ctx.Err()
		}
	}
}

// Close releases every batch still queued. Batches that arrive later are
// released as they come.
func (r *Receiver) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, it := range r.queue {
		if it.Batch != nil {
			it.Batch.Release()
		}
	}
	r.queue = nil
}
