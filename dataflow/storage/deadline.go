package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptrace"
	"sync/atomic"
	"time"
)

// DefaultCallTimeout is how long an S3 call may make no progress before it
// fails with ErrUnreachable.
const DefaultCallTimeout = 10 * time.Second

// answerAllowance is the extra wait for the answer to an upload, per byte
// uploaded, from the handover of the last byte or the last drop of the send
// queue after it (draining): a proxy on the way may still hold bytes, and
// the server stores them before answering. Where the send queue cannot be
// seen, it alone covers the bytes in socket buffers, for links of at least
// 1 MiB/s.
const answerAllowance = time.Second / (1 << 20)

// stallError is the cause of a call cancelled by its watchdog.
type stallError struct{ idle time.Duration }

func (e *stallError) Error() string { return fmt.Sprintf("no progress for %v", e.idle) }

// watchdog fails a call that makes no progress for a while, rather than
// bounding the call as a whole: a large object that keeps moving is never
// cut off, a server that stopped answering (a frozen process whose kernel
// still accepts connections, a silent network) is noticed within limit.
// Progress is any byte of the body moving, or a listing entry arriving,
// or, after an upload's handover, its connection's send queue shrinking.
type watchdog struct {
	limit time.Duration
	start time.Time
	last  atomic.Int64 // time.Since(start) at the last progress
	extra atomic.Int64 // added to limit once an upload's body is sent
	// conn is the connection the call's request went out on, and queued
	// what its kernel send queue held when last looked at (-1: not yet).
	conn   atomic.Pointer[net.Conn]
	queued atomic.Int64
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// watch returns ctx for one call and its watchdog; the caller must stop it.
func watch(ctx context.Context, limit time.Duration) (context.Context, *watchdog) {
	cctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{limit: limit, start: time.Now(), cancel: cancel}
	w.queued.Store(-1)
	w.timer = time.AfterFunc(limit, w.fire)
	return cctx, w
}

// traced returns ctx with a trace that tells w the connection each
// request of the call goes out on.
func (w *watchdog) traced(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			c := i.Conn
			w.conn.Store(&c)
			w.queued.Store(-1)
		},
	})
}

// draining reports whether the upload's bytes are still leaving: its
// connection's send queue holds fewer than when last looked at. Once the
// body is handed over, this is the only progress the client can see; on a
// slow link the queue can hold megabytes, longer to drain than any fixed
// allowance per byte.
func (w *watchdog) draining() bool {
	c := w.conn.Load()
	if c == nil {
		return false
	}
	q, ok := sendQueue(*c)
	if !ok {
		return false
	}
	prev := w.queued.Swap(q)
	return prev >= 0 && q < prev
}

func (w *watchdog) fire() {
	// Once an upload is handed over, the timer also fires every limit to
	// look at the send queue: every drop in it is progress.
	sent := w.extra.Load() > 0
	if sent && w.draining() {
		w.progress()
	}
	allowed := w.limit + time.Duration(w.extra.Load())
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if idle < allowed {
		next := allowed - idle
		if sent {
			next = min(next, w.limit)
		}
		w.timer.Reset(next)
		return
	}
	w.cancel(&stallError{idle: allowed.Round(time.Millisecond)})
}

// progress records that the call moved.
func (w *watchdog) progress() { w.last.Store(int64(time.Since(w.start))) }

// sent records that an upload of n bytes handed its last byte over.
func (w *watchdog) sent(n int64) {
	w.extra.Store(max(1, n*int64(answerAllowance)))
	w.progress()
}

func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel(nil)
}

// stalled reports the watchdog's verdict on a failed call: the idle time
// that cancelled it, or false when something else ended it.
func stalled(ctx, cctx context.Context) (time.Duration, bool) {
	var se *stallError
	if ctx.Err() == nil && errors.As(context.Cause(cctx), &se) {
		return se.idle, true
	}
	return 0, false
}

// progressReader reports every read of a download's body.
type progressReader struct {
	r io.Reader
	w *watchdog
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.progress()
	}
	return n, err
}
