package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
)

// A Mesh is one worker process's direct connections to the other workers
// of its run, so that record batches from a task on one worker to a task
// on another go straight there instead of through the coordinator (as
// TaskManagers exchange data among themselves in Flink, while the
// JobManager only coordinates). Each worker listens on an address of its
// own, which its coordinator learns and hands to the others; between two
// workers the one with the lower id dials, once, and the connection then
// carries every data channel of both directions, for every attempt, until
// one of the two dies.
//
// A peer is named by its id and the address it listens on, which is new
// for each incarnation: a replacement of worker 3 is another peer than
// the worker 3 it replaces, and a connection to the old one is never
// handed out for the new one. The run's token guards the listener as it
// guards the coordinator's, so a stranger cannot join the data plane.
type Mesh struct {
	self  int
	token string
	opts  Options
	ln    *Listener

	mu      sync.Mutex
	conns   map[peerKey]*Conn
	dialing map[peerKey]chan struct{}
	// arrived is closed (and replaced) whenever a connection is added or
	// a peer is gone.
	arrived chan struct{}
	// gone are the peers the coordinator said are dead: waiting for one
	// ends at once.
	gone   map[peerKey]bool
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

type peerKey struct {
	id   int
	addr string
}

// ErrMeshClosed is returned by Peer once the mesh is closed.
var ErrMeshClosed = errors.New("wire: the worker's mesh is closed")

// ErrPeerGone is returned by Peer for a peer said to be dead (Gone).
var ErrPeerGone = errors.New("wire: the peer is gone")

// NewMesh listens for the peers of worker self on host (a free port; ""
// is loopback), with the run's token. opts configure every connection of
// the mesh; a peer may never kill this process, so OnKill is dropped.
func NewMesh(self int, host, token string, opts Options) (*Mesh, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	opts.OnKill = nil
	m := &Mesh{self: self, token: token, opts: opts, conns: map[peerKey]*Conn{}, gone: map[peerKey]bool{},
		dialing: map[peerKey]chan struct{}{}, arrived: make(chan struct{}), done: make(chan struct{})}
	ln, err := Listen(net.JoinHostPort(host, "0"), ListenConfig{Token: token, Conn: opts,
		Welcome: func(h Hello) (Welcome, error) {
			id, _, err := parsePeerName(h.Worker)
			switch {
			case err != nil:
				return Welcome{}, err
			case id >= self:
				// The lower id dials: a dial from above is a confused peer.
				return Welcome{}, fmt.Errorf("worker %d dials worker %d; the lower id dials", id, self)
			}
			return Welcome{}, nil
		}})
	if err != nil {
		return nil, fmt.Errorf("worker %d listening for its peers: %w", self, err)
	}
	m.ln = ln
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr is where this worker's peers dial it.
func (m *Mesh) Addr() string { return m.ln.Addr() }

// peerName is the Hello.Worker of a mesh dial: the dialer's id and the
// address it listens on, which names its incarnation.
func peerName(id int, addr string) string { return strconv.Itoa(id) + "@" + addr }

func parsePeerName(s string) (int, string, error) {
	a, addr, ok := strings.Cut(s, "@")
	id, err := strconv.Atoi(a)
	if !ok || err != nil || id < 0 || addr == "" {
		return 0, "", fmt.Errorf("%w: %q names no worker of a mesh", ErrMalformed, s)
	}
	return id, addr, nil
}

func (m *Mesh) acceptLoop() {
	defer m.wg.Done()
	for {
		c, h, err := m.ln.Accept(context.Background())
		if err != nil {
			return // closed
		}
		id, addr, _ := parsePeerName(h.Worker) // checked by Welcome
		if !m.add(peerKey{id, addr}, c) {
			_ = c.Close()
		}
	}
}

// add keeps c as the connection to peer k, unless the mesh is closed.
// Connections to earlier incarnations of the same worker are closed: a
// replacement means the one it replaces is dead.
func (m *Mesh) add(k peerKey, c *Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.gone[k] {
		return false
	}
	for old, oc := range m.conns {
		if old.id == k.id && old != k {
			_ = oc.nc.Close()
			delete(m.conns, old)
		}
	}
	if oc := m.conns[k]; oc != nil {
		_ = oc.nc.Close()
	}
	m.conns[k] = c
	close(m.arrived)
	m.arrived = make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		select {
		case <-c.Done():
			// The read loop may still be releasing its decoders: wait for
			// it, so a closed mesh holds no memory.
			_ = c.Close()
		case <-m.done:
			_ = c.Close()
			return
		}
		m.mu.Lock()
		if m.conns[k] == c {
			delete(m.conns, k)
		}
		m.mu.Unlock()
	}()
	return true
}

// Peer is the connection to worker id listening at addr: dialed here if
// this worker's id is the lower, else awaited from it. It returns when
// the connection is there, ctx ends or the mesh closes. A connection that
// broke is gone from the mesh; a later Peer makes (or awaits) a new one.
func (m *Mesh) Peer(ctx context.Context, id int, addr string) (*Conn, error) {
	if id == m.self {
		return nil, fmt.Errorf("wire: worker %d has no link to itself", id)
	}
	k := peerKey{id, addr}
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, ErrMeshClosed
		}
		if c := m.conns[k]; c != nil && c.Err() == nil {
			m.mu.Unlock()
			return c, nil
		}
		if m.gone[k] {
			m.mu.Unlock()
			return nil, fmt.Errorf("%w: worker %d (%s)", ErrPeerGone, id, addr)
		}
		wait := m.arrived
		if m.self < id {
			if ch := m.dialing[k]; ch != nil {
				wait = ch
			} else {
				ch = make(chan struct{})
				m.dialing[k] = ch
				m.mu.Unlock()
				c, err := m.dial(ctx, k)
				// In the mesh before the waiters wake: one that found
				// neither it nor a dial under way would dial again, and
				// the peer would close this connection over, with every
				// link already open on it.
				added := err == nil && m.add(k, c)
				m.mu.Lock()
				delete(m.dialing, k)
				close(ch)
				m.mu.Unlock()
				if err != nil {
					return nil, err
				}
				if !added {
					_ = c.Close()
					continue // closed, or the peer is gone: said above
				}
				return c, nil
			}
		}
		m.mu.Unlock()
		select {
		case <-wait:
		case <-m.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for worker %d (%s) to connect to worker %d: %w", id, addr, m.self, ctx.Err())
		}
	}
}

func (m *Mesh) dial(ctx context.Context, k peerKey) (*Conn, error) {
	c, _, err := Dial(ctx, k.addr, Hello{Token: m.token, Worker: peerName(m.self, m.Addr())}, m.opts)
	if err != nil {
		return nil, fmt.Errorf("worker %d connecting to worker %d: %w", m.self, k.id, err)
	}
	return c, nil
}

// Gone says peer id at addr is dead (its coordinator saw it die): a Peer
// waiting for it returns ErrPeerGone now, rather than at its deadline,
// and its connection, if any, closes. A replacement listens at another
// address, so it is not affected.
func (m *Mesh) Gone(id int, addr string) {
	k := peerKey{id, addr}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.gone[k] {
		return
	}
	m.gone[k] = true
	if c := m.conns[k]; c != nil {
		_ = c.nc.Close()
	}
	close(m.arrived)
	m.arrived = make(chan struct{})
}

// Close stops listening and closes every connection of the mesh.
func (m *Mesh) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	m.mu.Unlock()
	err := m.ln.Close()
	m.wg.Wait()
	return err
}
