package runtest

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// SlowProxy is a loopback TCP proxy in front of an S3 endpoint that delays
// every chunk it forwards, in both directions, and can cap the rate:
// injected latency for the storage deadline tests.
type SlowProxy struct {
	Endpoint string // http://127.0.0.1:PORT of the proxy

	delay atomic.Int64 // per chunk, nanoseconds
	rate  int          // bytes per second per direction, 0 = no cap
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
			p.wg.Go(func() { p.pipe(up, c) })
			p.wg.Go(func() { p.pipe(c, up) })
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

func (p *SlowProxy) pipe(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
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
		}
		if err != nil {
			return // io.EOF or a closed connection: close both sides
		}
	}
}
