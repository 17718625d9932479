package runtest

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy is a loopback TCP proxy in front of an S3 endpoint that delays
// every chunk it forwards, in both directions, and can cap the rate:
// injected latency for the storage deadline tests. With no delay and no
// cap it is a plain proxy whose counts let a test wait for what the server
// has been sent (Sent) and for the server to be done with every connection
// (WaitClosed) instead of sleeping. A side that ends its sending is
// half-closed towards the other, so the server sees a client vanish as an
// early end of the request and the proxy sees the server's answer to it.
type SlowProxy struct {
	Endpoint string // http://127.0.0.1:PORT of the proxy

	delay atomic.Int64 // per chunk, nanoseconds
	rate  int          // bytes per second per direction, 0 = no cap
	sent  atomic.Int64 // bytes forwarded to the server
	pipes atomic.Int64 // directions still forwarding
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

// StartSlowProxy forwards to target (http://host:port) with delay added to
// every chunk and at most rate bytes per second (0 = unlimited); it stops
// in cleanup.
func StartSlowProxy(t testing.TB, target string, delay time.Duration, rate int) *SlowProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &SlowProxy{Endpoint: "http://" + l.Addr().String(), rate: rate, l: l}
	p.delay.Store(int64(delay))
	addr := strings.TrimPrefix(target, "http://")
	p.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.pipes.Add(2)
			left := new(atomic.Int32)
			left.Store(2)
			p.wg.Go(func() { p.pipe(up, c, left, &p.sent) })
			p.wg.Go(func() { p.pipe(c, up, left, nil) })
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// SetDelay changes the delay for chunks forwarded from now on.
func (p *SlowProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Sent returns the bytes forwarded to the server so far, on every
// connection.
func (p *SlowProxy) Sent() int64 { return p.sent.Load() }

// WaitClosed waits until every connection accepted so far has ended in both
// directions: each client went away and the server closed its side, so it
// has finished with every request. It fails the test after limit.
func (p *SlowProxy) WaitClosed(t testing.TB, limit time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(limit); p.pipes.Load() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("proxy: %d directions still open after %s", p.pipes.Load(), limit)
		}
	}
}

// pipe copies src to dst, counting into sent if set. At src's clean end it
// half-closes dst; on an error, or once both directions of the connection
// (left counts them) ended, it closes both.
func (p *SlowProxy) pipe(dst, src net.Conn, left *atomic.Int32, sent *atomic.Int64) {
	clean := false
	defer func() {
		if left.Add(-1) == 0 || !clean || !halfClose(dst) {
			_ = dst.Close()
			_ = src.Close()
		}
		p.pipes.Add(-1)
	}()
	chunk := 32 << 10
	if p.rate > 0 && p.rate/10 < chunk {
		chunk = max(p.rate/10, 1)
	}
	buf := make([]byte, chunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if p.rate > 0 {
				time.Sleep(time.Duration(n) * time.Second / time.Duration(p.rate))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if sent != nil {
				sent.Add(int64(n))
			}
		}
		if err != nil {
			clean = errors.Is(err, io.EOF)
			return
		}
	}
}

// halfClose ends the sending side of c; false if c cannot be half-closed.
func halfClose(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	return ok && tc.CloseWrite() == nil
}
