package wire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Protocol is the version of the conversation above the frames; a Hello
// of another version is refused.
// 2 added the kill and close frames.
const Protocol = 2

// Hello is the first frame a dialer sends.
type Hello struct {
	// Token is the run's secret (NewToken); the listener refuses any other.
	Token string `json:"token"`
	// Worker names the dialer, for the listener's logs and its plan.
	Worker   string `json:"worker"`
	Protocol int    `json:"protocol"`
}

// Welcome is the listener's answer to an accepted Hello. Config is the
// caller's: a worker takes its whole configuration from it, so one
// started by hand or by another scheduler can join.
type Welcome struct {
	Config json.RawMessage `json:"config,omitempty"`
}

// ErrRefused is wrapped by Dial's error when the listener turned the
// Hello away.
var ErrRefused = errors.New("refused by the coordinator")

// NewToken returns a fresh run token: 32 random bytes, hex.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making a run token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// DefaultHandshakeTimeout bounds how long a new connection may take to
// say Hello, so a silent stranger cannot hold a connection open.
const DefaultHandshakeTimeout = 5 * time.Second

// ListenConfig configures a Listener.
type ListenConfig struct {
	// Token every Hello must carry. Required.
	Token string
	// Welcome builds the answer to an accepted Hello; an error refuses it
	// with the error's text. Nil: an empty Welcome.
	Welcome func(Hello) (Welcome, error)
	// HandshakeTimeout; DefaultHandshakeTimeout when zero.
	HandshakeTimeout time.Duration
	// Conn configures every accepted connection.
	Conn Options
}

// Listener accepts worker connections. Handshakes run concurrently, off
// Accept's caller: a stranger, a wrong token or a malformed first frame is
// logged and closed, and never reaches Accept.
type Listener struct {
	ln       net.Listener
	cfg      ListenConfig
	accepted chan accepted
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

type accepted struct {
	c     *Conn
	hello Hello
}

// Listen listens on addr; "" is a free port on loopback, where the
// coordinator listens unless told otherwise.
func Listen(addr string, cfg ListenConfig) (*Listener, error) {
	if cfg.Token == "" {
		return nil, errors.New("wire: Listen needs the run's token")
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	cfg.Conn = cfg.Conn.withDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for workers on %s: %w", addr, err)
	}
	l := &Listener{ln: ln, cfg: cfg, accepted: make(chan accepted), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// Addr is the address workers dial.
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Accept returns the next connection whose Hello was accepted.
func (l *Listener) Accept(ctx context.Context) (*Conn, Hello, error) {
	select {
	case a := <-l.accepted:
		return a.c, a.hello, nil
	case <-l.done:
		return nil, Hello{}, net.ErrClosed
	case <-ctx.Done():
		return nil, Hello{}, ctx.Err()
	}
}

// Close stops listening; connections already accepted stay open.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
	})
	l.wg.Wait()
	return err
}

func (l *Listener) acceptLoop() {
	defer l.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
			default:
				l.cfg.Conn.Log("wire: accept on %s: %v; no more workers are accepted", l.Addr(), err)
			}
			return
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Close must not wait out a silent stranger's handshake.
			hsDone := make(chan struct{})
			go func() {
				select {
				case <-l.done:
					_ = nc.Close()
				case <-hsDone:
				}
			}()
			c, h, err := l.handshake(nc)
			close(hsDone)
			if err != nil {
				select {
				case <-l.done: // closed under it: not a refusal
				default:
					l.cfg.Conn.Log("wire: refused %s: %v", nc.RemoteAddr(), err)
				}
				_ = nc.Close()
				return
			}
			select {
			case l.accepted <- accepted{c, h}:
			case <-l.done:
				_ = c.Close()
			}
		}()
	}
}

// handshake reads the Hello, checks it and answers. A refusal is sent
// before the connection is closed, so an honest worker with a stale token
// learns why.
func (l *Listener) handshake(nc net.Conn) (*Conn, Hello, error) {
	_ = nc.SetDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	r := NewReader(nc, helloMax)
	w := NewWriter(nc)
	refuse := func(reason string) error {
		if w.Write(KindRefused, 0, []byte(reason)) == nil {
			_ = w.Flush()
		}
		return errors.New(reason)
	}
	h, err := r.Next()
	if err != nil {
		return nil, Hello{}, fmt.Errorf("no hello: %w", err)
	}
	if h.Kind != KindHello {
		return nil, Hello{}, fmt.Errorf("%w: first frame is %s, not hello", ErrMalformed, h.Kind)
	}
	p, err := r.Payload()
	if err != nil {
		return nil, Hello{}, err
	}
	var hello Hello
	if err := json.Unmarshal(p, &hello); err != nil {
		return nil, Hello{}, fmt.Errorf("%w: hello is not JSON: %v", ErrMalformed, err)
	}
	if subtle.ConstantTimeCompare([]byte(hello.Token), []byte(l.cfg.Token)) != 1 {
		return nil, Hello{}, refuse("wrong token")
	}
	if hello.Protocol != Protocol {
		return nil, Hello{}, refuse(fmt.Sprintf("protocol %d, the coordinator speaks %d", hello.Protocol, Protocol))
	}
	welcome := Welcome{}
	if l.cfg.Welcome != nil {
		if welcome, err = l.cfg.Welcome(hello); err != nil {
			return nil, Hello{}, refuse(err.Error())
		}
	}
	b, err := json.Marshal(welcome)
	if err != nil {
		return nil, Hello{}, err
	}
	if err := w.Write(KindWelcome, 0, b); err != nil {
		return nil, Hello{}, err
	}
	if err := w.Flush(); err != nil {
		return nil, Hello{}, err
	}
	_ = nc.SetDeadline(time.Time{})
	return newConn(nc, r.withMax(l.cfg.Conn.MaxFrame), w, l.cfg.Conn), hello, nil
}

// helloMax bounds the handshake's frames: nothing a stranger sends before
// it is accepted may make the listener allocate more.
const helloMax = 64 << 10

// Dial connects to a listener (a coordinator, or a peer's mesh) and says
// Hello. The listener's refusal comes back as an error wrapping
// ErrRefused, with its reason. The connect and the handshake together
// end within DefaultHandshakeTimeout (or ctx's deadline, if sooner): an
// address whose packets vanish would otherwise hold the dial for the
// system's connect timeout, about two minutes on Linux.
func Dial(ctx context.Context, addr string, hello Hello, opts Options) (*Conn, Welcome, error) {
	return dial(ctx, addr, hello, opts, DefaultHandshakeTimeout)
}

func dial(ctx context.Context, addr string, hello Hello, opts Options, timeout time.Duration) (*Conn, Welcome, error) {
	opts = opts.withDefaults()
	if hello.Protocol == 0 {
		hello.Protocol = Protocol
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	d := net.Dialer{Deadline: deadline}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, Welcome{}, fmt.Errorf("dialing %s: %w", addr, err)
	}
	fail := func(err error) (*Conn, Welcome, error) {
		_ = nc.Close()
		return nil, Welcome{}, fmt.Errorf("joining %s: %w", addr, err)
	}
	_ = nc.SetDeadline(deadline)
	w := NewWriter(nc)
	b, err := json.Marshal(hello)
	if err != nil {
		return fail(err)
	}
	if err := w.Write(KindHello, 0, b); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	r := NewReader(nc, opts.MaxFrame)
	h, err := r.Next()
	if err != nil {
		return fail(fmt.Errorf("no answer to hello: %w", err))
	}
	p, err := r.Payload()
	if err != nil {
		return fail(err)
	}
	switch h.Kind {
	case KindRefused:
		return fail(fmt.Errorf("%w: %s", ErrRefused, p))
	case KindWelcome:
	default:
		return fail(fmt.Errorf("%w: answer to hello is %s", ErrMalformed, h.Kind))
	}
	var welcome Welcome
	if err := json.Unmarshal(p, &welcome); err != nil {
		return fail(fmt.Errorf("%w: welcome is not JSON: %v", ErrMalformed, err))
	}
	_ = nc.SetDeadline(time.Time{})
	return newConn(nc, r, w, opts), welcome, nil
}
