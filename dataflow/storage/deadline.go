package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// DefaultCallTimeout is how long an S3 call may make no progress before it
// fails with ErrUnreachable.
const DefaultCallTimeout = 10 * time.Second

// answerAllowance is the extra wait for the answer to an upload, per byte
// uploaded: once the last byte is handed to the connection it may still sit
// in socket buffers, and the server stores it before answering. One second
// per MiB keeps a large PUT over a slow link from being cut off while it is
// still moving.
const answerAllowance = time.Second / (1 << 20)

// stallError is the cause of a call cancelled by its watchdog.
type stallError struct{ idle time.Duration }

func (e *stallError) Error() string { return fmt.Sprintf("no progress for %v", e.idle) }

// watchdog fails a call that makes no progress for a while, rather than
// bounding the call as a whole: a large object that keeps moving is never
// cut off, a server that stopped answering (a frozen process whose kernel
// still accepts connections, a silent network) is noticed within limit.
// Progress is any byte of the body moving, or a listing entry arriving.
type watchdog struct {
	limit  time.Duration
	start  time.Time
	last   atomic.Int64 // time.Since(start) at the last progress
	extra  atomic.Int64 // added to limit once an upload's body is sent
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// watch returns ctx for one call and its watchdog; the caller must stop it.
func watch(ctx context.Context, limit time.Duration) (context.Context, *watchdog) {
	cctx, cancel := context.WithCancelCause(ctx)
	w := &watchdog{limit: limit, start: time.Now(), cancel: cancel}
	w.timer = time.AfterFunc(limit, w.fire)
	return cctx, w
}

func (w *watchdog) fire() {
	allowed := w.limit + time.Duration(w.extra.Load())
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	if idle < allowed {
		w.timer.Reset(allowed - idle)
		return
	}
	w.cancel(&stallError{idle: allowed.Round(time.Millisecond)})
}

// progress records that the call moved.
func (w *watchdog) progress() { w.last.Store(int64(time.Since(w.start))) }

// sent records that an upload of n bytes handed its last byte over.
func (w *watchdog) sent(n int64) {
	w.extra.Store(n * int64(answerAllowance))
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
