package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Options configure a connection, on either side.
type Options struct {
	// Alloc allocates every received batch. memory.DefaultAllocator when nil.
	Alloc memory.Allocator
	// MaxFrame bounds a received frame's payload; DefaultMaxFrame when zero.
	MaxFrame int
	// HeartbeatInterval is how often this side beats; 0 sends none.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout declares the peer dead when nothing at all (no
	// beat, no data) has arrived for this long; 0 never does.
	HeartbeatTimeout time.Duration
	// Log reports why a connection closed or a stranger was refused.
	// log.Printf when nil.
	Log func(format string, args ...any)
	// OnKill, when set, is called when the peer sends a kill frame
	// (Conn.Kill): a worker process sets it to SIGKILL itself. Without it
	// a kill frame is malformed and closes the connection, so a worker can
	// never end its coordinator.
	OnKill func()
}

func (o Options) withDefaults() Options {
	if o.Alloc == nil {
		o.Alloc = memory.DefaultAllocator
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.Log == nil {
		o.Log = log.Printf
	}
	return o
}

// ErrPeerSilent is wrapped by a connection's error when the heartbeat
// timeout passed with nothing from the peer.
var ErrPeerSilent = errors.New("peer silent past the heartbeat timeout")

// ErrClosedByPeer is a connection's error when the peer closed it on
// purpose (its Close), rather than dying or being cut off.
var ErrClosedByPeer = errors.New("the peer closed the connection on purpose")

// Conn is one connection between the coordinator and a worker (or two
// workers), after the handshake. One goroutine reads and dispatches its
// frames: control messages to Control, data to the channel receivers,
// credits to the channel senders. Writes are serialised; every frame is
// flushed as written. The connection closes on the first error either way,
// and Err says why; everything waiting on it then returns that error.
type Conn struct {
	nc   net.Conn
	opts Options
	r    *Reader

	wmu sync.Mutex
	w   *Writer

	mu        sync.Mutex
	senders   map[uint32]*senderState
	receivers map[uint32]*Receiver

	control chan []byte

	lastRecv atomic.Int64 // unix nanoseconds of the last frame received
	beats    atomic.Uint64

	done    chan struct{}
	closeMu sync.Mutex
	err     error
	wg      sync.WaitGroup
}

// closeNoticeTimeout bounds how long Close waits to tell the peer.
const closeNoticeTimeout = time.Second

func newConn(nc net.Conn, r *Reader, w *Writer, opts Options) *Conn {
	c := &Conn{
		nc: nc, opts: opts, r: r, w: w,
		senders:   map[uint32]*senderState{},
		receivers: map[uint32]*Receiver{},
		control:   make(chan []byte, 16),
		done:      make(chan struct{}),
	}
	c.lastRecv.Store(time.Now().UnixNano())
	c.wg.Add(1)
	go c.readLoop()
	if opts.HeartbeatInterval > 0 || opts.HeartbeatTimeout > 0 {
		c.wg.Add(1)
		go c.heartbeat()
	}
	return c
}

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is this side's address: a worker listens for its peers on
// the interface it reached its coordinator through.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Done is closed when the connection has closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err is why the connection closed (nil while open; net.ErrClosed after
// a local Close).
func (c *Conn) Err() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.err
}

// Close tells the peer the connection is closed on purpose (KindClose, so
// it can tell this end from a death), closes it and waits for its
// goroutines. A peer that does not read holds Close up for at most
// closeNoticeTimeout.
func (c *Conn) Close() error {
	if c.Err() == nil {
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeNoticeTimeout))
		_ = c.write(KindClose, 0)
	}
	c.closeWith(net.ErrClosed)
	c.wg.Wait()
	return nil
}

// closeWith records the first reason and closes the socket, which ends
// the read loop and unblocks any write.
func (c *Conn) closeWith(err error) {
	c.closeMu.Lock()
	if c.err != nil {
		c.closeMu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.closeMu.Unlock()
	if !errors.Is(err, net.ErrClosed) {
		c.opts.Log("wire: connection with %s closed: %v", c.nc.RemoteAddr(), err)
	}
	_ = c.nc.Close()
}

// write sends one frame, flushed.
func (c *Conn) write(kind Kind, channel uint32, parts ...[]byte) error {
	n, body := partsBody(parts)
	return c.writeStreamed(kind, channel, n, body)
}

// writeStreamed sends one frame of n bytes that body writes, flushed.
func (c *Conn) writeStreamed(kind Kind, channel uint32, n int, body func(io.Writer) error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.Err(); err != nil {
		return err
	}
	err := c.w.WriteStreamed(kind, channel, n, body)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		c.closeWith(fmt.Errorf("writing a %s frame: %w", kind, err))
		return c.Err()
	}
	return nil
}

// SendControl sends one control message.
func (c *Conn) SendControl(msg []byte) error { return c.write(KindControl, 0, msg) }

// Kill asks the peer to end its own process at once (KindKill); the
// connection then breaks as for any death. A peer without Options.OnKill
// closes the connection instead.
func (c *Conn) Kill() error { return c.write(KindKill, 0) }

// Control returns the next control message from the peer.
func (c *Conn) Control(ctx context.Context) ([]byte, error) {
	select {
	case m := <-c.control:
		return m, nil
	case <-c.done:
		select {
		case m := <-c.control:
			return m, nil
		default:
		}
		return nil, c.Err()
	case <-ctx.Done():
		select { // a message that has arrived is not lost to the deadline
		case m := <-c.control:
			return m, nil
		default:
		}
		return nil, ctx.Err()
	}
}

// Beats is how many heartbeats the peer has sent.
func (c *Conn) Beats() uint64 { return c.beats.Load() }

// heartbeat beats every interval and declares the peer dead when
// nothing came for the timeout.
func (c *Conn) heartbeat() {
	defer c.wg.Done()
	tick := c.opts.HeartbeatInterval
	if tick <= 0 || (c.opts.HeartbeatTimeout > 0 && c.opts.HeartbeatTimeout/4 < tick) {
		tick = c.opts.HeartbeatTimeout / 4
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var seq uint64
	var b [16]byte
	next := time.Now()
	for {
		select {
		case <-c.done:
			return
		case now := <-t.C:
			if to := c.opts.HeartbeatTimeout; to > 0 {
				if since := now.Sub(time.Unix(0, c.lastRecv.Load())); since > to {
					c.closeWith(fmt.Errorf("%w: nothing for %s (timeout %s)", ErrPeerSilent, since.Round(time.Millisecond), to))
					return
				}
			}
			if c.opts.HeartbeatInterval > 0 && !now.Before(next) {
				seq++
				binary.LittleEndian.PutUint64(b[:8], seq)
				binary.LittleEndian.PutUint64(b[8:], uint64(now.UnixNano()))
				if c.write(KindHeartbeat, 0, b[:]) != nil {
					return
				}
				next = now.Add(c.opts.HeartbeatInterval)
			}
		}
	}
}

// readLoop reads and dispatches every frame until the connection breaks.
// A malformed frame closes the connection with its reason; it never
// panics the process.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer c.releaseDecoders()
	for {
		h, err := c.r.Next()
		if err == nil {
			c.lastRecv.Store(time.Now().UnixNano())
			err = c.dispatch(h)
		}
		if err != nil {
			if err == io.EOF {
				err = fmt.Errorf("peer closed the connection: %w", io.EOF)
			}
			select {
			case <-c.done: // closed here: the read error is the consequence
			default:
				c.closeWith(err)
			}
			return
		}
	}
}

func (c *Conn) dispatch(h Header) error {
	switch h.Kind {
	case KindControl:
		p, err := c.r.Payload()
		if err != nil {
			return err
		}
		select {
		case c.control <- p:
			return nil
		case <-c.done:
			return c.Err()
		}
	case KindHeartbeat:
		p, err := c.r.Payload()
		if err != nil {
			return err
		}
		if len(p) != 16 {
			return fmt.Errorf("%w: heartbeat of %d bytes", ErrMalformed, len(p))
		}
		c.beats.Add(1)
		return nil
	case KindClose:
		p, err := c.r.Payload()
		if err != nil {
			return err
		}
		if len(p) != 0 {
			return fmt.Errorf("%w: close frame of %d bytes", ErrMalformed, len(p))
		}
		return ErrClosedByPeer
	case KindKill:
		p, err := c.r.Payload()
		if err != nil {
			return err
		}
		if c.opts.OnKill == nil || len(p) != 0 {
			return fmt.Errorf("%w: kill frame of %d bytes, which this side does not take", ErrMalformed, len(p))
		}
		c.opts.OnKill()
		return errors.New("killed at the peer's request")
	case KindCredit:
		p, err := c.r.Payload()
		if err != nil {
			return err
		}
		if len(p) != 4 {
			return fmt.Errorf("%w: credit of %d bytes", ErrMalformed, len(p))
		}
		return c.sender(h.Channel).grant(int(binary.LittleEndian.Uint32(p)))
	case KindSchema, KindBatch, KindBarrier, KindEnd:
		c.mu.Lock()
		rc := c.receivers[h.Channel]
		c.mu.Unlock()
		if rc == nil {
			return fmt.Errorf("%w: %s frame for channel %d, which is not open", ErrMalformed, h.Kind, h.Channel)
		}
		return rc.receive(h)
	}
	return fmt.Errorf("%w: %s frame after the handshake", ErrMalformed, h.Kind)
}

func (c *Conn) releaseDecoders() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rc := range c.receivers {
		rc.dec.release()
	}
}
