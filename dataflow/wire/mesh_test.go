package wire

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func newTestMesh(t *testing.T, id int, token string, alloc memory.Allocator) *Mesh {
	t.Helper()
	m, err := NewMesh(id, "", token, Options{Alloc: alloc, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestMeshLinksTwoWorkersDirectly: the lower id dials, the higher awaits
// it, and the one connection carries a data channel each way.
func TestMeshLinksTwoWorkersDirectly(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { alloc.AssertSize(t, 0) }) // after the meshes close
	token, _ := NewToken()
	m0, m1 := newTestMesh(t, 0, token, alloc), newTestMesh(t, 1, token, alloc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan *Conn, 1)
	go func() {
		c, err := m1.Peer(ctx, 0, m0.Addr())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	c0, err := m0.Peer(ctx, 1, m1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c1 := <-got
	if c1 == nil {
		t.FailNow()
	}
	if again, _ := m0.Peer(ctx, 1, m1.Addr()); again != c0 {
		t.Fatal("a second Peer dialed again instead of reusing the connection")
	}
	for _, dir := range [][2]*Conn{{c0, c1}, {c1, c0}} {
		rx, err := dir[1].OpenReceiver(7, testSchema, 2)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := dir[0].OpenSender(7, testSchema, alloc)
		if err != nil {
			t.Fatal(err)
		}
		rec := makeBatch(alloc, rand.New(rand.NewPCG(1, 2)), 5)
		if err := tx.Send(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		it, err := rx.Next(ctx)
		if err != nil || it.Batch == nil || it.Batch.NumRows() != 5 {
			t.Fatalf("received %+v, %v; want the batch of 5 rows", it, err)
		}
		it.Batch.Release()
		if err := tx.End(ctx); err != nil {
			t.Fatal(err)
		}
		if it, err := rx.Next(ctx); err != nil || !it.End {
			t.Fatalf("received %+v, %v; want the end", it, err)
		}
		rx.Close()
	}
}

// TestMeshRefusesStrangersAndConfusedPeers: a dialer without the run's
// token, one that names no worker, and a higher id dialing a lower are
// refused, and none of them becomes a peer.
func TestMeshRefusesStrangersAndConfusedPeers(t *testing.T) {
	token, _ := NewToken()
	m1 := newTestMesh(t, 1, token, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range []Hello{
		{Token: "not the token", Worker: "0@127.0.0.1:1"},
		{Token: token, Worker: "somebody"},
		{Token: token, Worker: "2@127.0.0.1:1"},
	} {
		_, _, err := Dial(ctx, m1.Addr(), h, Options{Log: t.Logf})
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("hello %+v: %v, want a refusal", h, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if c, err := m1.Peer(short, 0, "127.0.0.1:1"); err == nil {
		t.Fatalf("a refused dialer became peer 0 (%v)", c.RemoteAddr())
	}
}

// TestMeshReplacementIsANewPeer: worker 1's replacement listens at a new
// address; worker 0 dials it afresh, and its link to the dead one is
// closed rather than handed out.
func TestMeshReplacementIsANewPeer(t *testing.T) {
	token, _ := NewToken()
	m0, m1 := newTestMesh(t, 0, token, nil), newTestMesh(t, 1, token, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old, err := m0.Peer(ctx, 1, m1.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_ = m1.Close() // worker 1 dies
	select {
	case <-old.Done():
	case <-ctx.Done():
		t.Fatal("the link to a closed peer never broke")
	}
	m1b := newTestMesh(t, 1, token, nil)
	c, err := m0.Peer(ctx, 1, m1b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if c == old || c.Err() != nil {
		t.Fatal("the replacement got the dead worker's connection")
	}
	if _, err := m1b.Peer(ctx, 0, m0.Addr()); err != nil {
		t.Fatal(err)
	}
}

// TestMeshWaitForAGonePeerEndsAtOnce: worker 1 awaits worker 0's dial
// (the lower id dials), which never comes; once the coordinator says
// worker 0 at that address is gone, the wait ends with ErrPeerGone well
// before its deadline, and a replacement at another address is still
// reached.
func TestMeshWaitForAGonePeerEndsAtOnce(t *testing.T) {
	token, _ := NewToken()
	m1 := newTestMesh(t, 1, token, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := m1.Peer(ctx, 0, "127.0.0.1:1") // worker 0 never dials
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	m1.Gone(0, "127.0.0.1:1")
	select {
	case err := <-errc:
		if !errors.Is(err, ErrPeerGone) {
			t.Fatalf("waiting for a gone peer: %v, want ErrPeerGone", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("the wait ended %v after Gone", d)
		}
	case <-ctx.Done():
		t.Fatal("the wait for a gone peer ran to its deadline")
	}
	m0 := newTestMesh(t, 0, token, nil)
	if _, err := m0.Peer(ctx, 1, m1.Addr()); err != nil {
		t.Fatal(err)
	}
	if _, err := m1.Peer(ctx, 0, m0.Addr()); err != nil {
		t.Fatalf("the replacement at another address: %v", err)
	}
}

// TestMeshConcurrentPeersShareOneDial: many links of a worker ask for the
// same peer at once (an attempt's tasks start together); one connection
// is dialed and every caller gets it. Waiters woken before the dialed
// connection was in the mesh used to dial a second one, which the peer
// took as a redial and closed the first over: every link already open on
// it broke (seen as a "peer-lost" between two live workers under load).
func TestMeshConcurrentPeersShareOneDial(t *testing.T) {
	// More threads than this machine's two cores make the waiters race
	// the dialer for the mesh's lock far more often.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8))
	token, _ := NewToken()
	for round := range 30 {
		m0, m1 := newTestMesh(t, 0, token, memory.DefaultAllocator), newTestMesh(t, 1, token, memory.DefaultAllocator)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		const callers = 64
		got := make(chan *Conn, callers)
		start := make(chan struct{})
		for range callers {
			go func() {
				<-start
				c, err := m0.Peer(ctx, 1, m1.Addr())
				if err != nil {
					t.Error(err)
				}
				got <- c
			}()
		}
		close(start)
		var first *Conn
		for range callers {
			c := <-got
			if first == nil {
				first = c
			}
			if c == nil || c != first {
				t.Fatalf("round %d: callers got different connections", round)
			}
		}
		c1, err := m1.Peer(ctx, 0, m0.Addr())
		if err != nil {
			t.Fatal(err)
		}
		// A second dial, if any, has reached m1 by now or soon: give it
		// the time to close the first connection over.
		time.Sleep(20 * time.Millisecond)
		if first.Err() != nil || c1.Err() != nil {
			t.Fatalf("round %d: the link broke between two live workers: %v / %v", round, first.Err(), c1.Err())
		}
		cancel()
		_ = m0.Close()
		_ = m1.Close()
	}
}
