package wire

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "value", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// logSink collects a side's log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// waitLog waits for a log line containing s.
func (l *logSink) waitLog(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if l.has(s) {
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("no log line with %q; lines: %q", s, l.lines)
}

type pairOpts struct {
	coord, worker Options
}

// pair returns a listener and both ends of one accepted connection.
func pair(t *testing.T, po pairOpts) (l *Listener, coord, worker *Conn, log *logSink) {
	t.Helper()
	log = &logSink{}
	if po.coord.Log == nil {
		po.coord.Log = log.printf
	}
	if po.worker.Log == nil {
		po.worker.Log = log.printf
	}
	token, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l, err = Listen("", ListenConfig{Token: token, Conn: po.coord,
		Welcome: func(h Hello) (Welcome, error) { return Welcome{Config: []byte(`{"worker":"` + h.Worker + `"}`)}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	worker, welcome, err := Dial(ctx, l.Addr(), Hello{Token: token, Worker: "w1"}, po.worker)
	if err != nil {
		t.Fatal(err)
	}
	if string(welcome.Config) != `{"worker":"w1"}` {
		t.Fatalf("welcome config %s", welcome.Config)
	}
	coord, hello, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hello.Worker != "w1" {
		t.Fatalf("hello from %q", hello.Worker)
	}
	t.Cleanup(func() { _ = coord.Close(); _ = worker.Close() })
	return l, coord, worker, log
}

func makeBatch(alloc memory.Allocator, rng *rand.Rand, rows int) arrow.RecordBatch {
	b := array.NewRecordBuilder(alloc, testSchema)
	defer b.Release()
	for i := 0; i < rows; i++ {
		for c := 0; c < 3; c++ {
			b.Field(c).(*array.Int64Builder).Append(rng.Int64())
		}
	}
	return b.NewRecordBatch()
}

func TestBatchesAndBarriersKeepTheirOrder(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	sendAlloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	recvAlloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer sendAlloc.AssertSize(t, 0)
	defer recvAlloc.AssertSize(t, 0)
	_, coord, worker, _ := pair(t, pairOpts{coord: Options{Alloc: recvAlloc}})
	defer coord.Close()
	defer worker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rx, err := coord.OpenReceiver(3, testSchema, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := worker.OpenSender(3, testSchema, sendAlloc)
	if err != nil {
		t.Fatal(err)
	}
	// What was sent, in order: a batch's copy (by value) or a barrier.
	var sent []string
	errc := make(chan error, 1)
	var mu sync.Mutex
	go func() {
		for i := 0; i < 60; i++ {
			if i%7 == 3 {
				p := fmt.Sprintf("barrier %d", i)
				mu.Lock()
				sent = append(sent, p)
				mu.Unlock()
				if err := tx.Barrier(ctx, []byte(p)); err != nil {
					errc <- err
					return
				}
				continue
			}
			rec := makeBatch(sendAlloc, rng, 1+rng.IntN(5000))
			mu.Lock()
			sent = append(sent, render(rec))
			mu.Unlock()
			err := tx.Send(ctx, rec)
			rec.Release()
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- tx.End(ctx)
	}()
	var got []string
	for {
		it, err := rx.Next(ctx)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if it.End {
			break
		}
		if it.Batch != nil {
			got = append(got, render(it.Batch))
			it.Batch.Release()
			continue
		}
		got = append(got, string(it.Barrier))
	}
	if err := <-errc; err != nil {
		t.Fatalf("seed %d: sender: %v", seed, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(sent) {
		t.Fatalf("seed %d: received %d items, sent %d", seed, len(got), len(sent))
	}
	for i := range sent {
		if got[i] != sent[i] {
			t.Fatalf("seed %d: item %d differs: got %.80s, sent %.80s", seed, i, got[i], sent[i])
		}
	}
}

// render is a batch's values as text, to compare by value.
func render(rec arrow.RecordBatch) string {
	var sb strings.Builder
	for _, col := range rec.Columns() {
		fmt.Fprint(&sb, col.(*array.Int64).Int64Values(), ";")
	}
	return sb.String()
}

func TestASlowReceiverHoldsTheSenderBack(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	_, coord, worker, _ := pair(t, pairOpts{coord: Options{Alloc: alloc}, worker: Options{Alloc: alloc}})
	defer coord.Close()
	defer worker.Close()
	rx, err := coord.OpenReceiver(1, testSchema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := worker.OpenSender(1, testSchema, alloc)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	send := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		rec := makeBatch(alloc, rng, 100)
		defer rec.Release()
		return tx.Send(ctx, rec)
	}
	for i := 0; i < 2; i++ {
		if err := send(10 * time.Second); err != nil {
			t.Fatalf("send %d within the credit: %v", i, err)
		}
	}
	if err := send(200 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third send with a full receiver: %v, want it to wait (deadline exceeded)", err)
	}
	it, err := rx.Next(context.Background())
	if err != nil || it.Batch == nil {
		t.Fatalf("next: %v %+v", err, it)
	}
	it.Batch.Release()
	if err := send(10 * time.Second); err != nil {
		t.Fatalf("send after the receiver took one: %v", err)
	}
}

func TestAStrangerWithoutTheTokenIsRefused(t *testing.T) {
	l, _, _, log := pair(t, pairOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := Dial(ctx, l.Addr(), Hello{Token: "not-the-token", Worker: "stranger"}, Options{Log: log.printf})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "wrong token") {
		t.Fatalf("dial with a wrong token: %v, want refused: wrong token", err)
	}
	log.waitLog(t, "wrong token")
	// Nothing was accepted for it.
	actx, acancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer acancel()
	if c, h, err := l.Accept(actx); err == nil {
		t.Fatalf("the stranger was accepted: %v %+v", c.RemoteAddr(), h)
	}
}

func TestGarbageClosesOnlyItsConnection(t *testing.T) {
	l, coord, worker, log := pair(t, pairOpts{})
	// Before the handshake: bytes that are not a frame.
	nc, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	log.waitLog(t, "bad magic")
	_ = nc.Close()

	// After it: a frame whose payload does not match its checksum.
	rx, err := coord.OpenReceiver(9, testSchema, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	worker.wmu.Lock()
	var hdr [headerLen]byte
	putHeader(hdr[:], Header{Kind: KindBarrier, Channel: 9, Length: 3})
	_, _ = worker.nc.Write(append(hdr[:], 'a', 'b', 'c', 1, 2, 3, 4))
	worker.wmu.Unlock()
	select {
	case <-coord.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a frame with a bad checksum did not close the connection")
	}
	if !errors.Is(coord.Err(), ErrMalformed) || !strings.Contains(coord.Err().Error(), "checksum") {
		t.Fatalf("connection closed with %v, want a malformed-frame checksum error", coord.Err())
	}
	log.waitLog(t, "checksum")
	if _, err := rx.Next(context.Background()); err == nil {
		t.Fatal("receiver delivered after its connection closed")
	}
	// The listener still serves.
	_, _, _, _ = pairOn(t, l)
}

// pairOn dials l again with its token: the listener still accepts.
func pairOn(t *testing.T, l *Listener) (*Conn, *Conn, Hello, Welcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, welcome, err := Dial(ctx, l.Addr(), Hello{Token: l.cfg.Token, Worker: "w2"}, Options{Log: func(string, ...any) {}})
	if err != nil {
		t.Fatalf("the listener stopped accepting: %v", err)
	}
	c, h, err := l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = w.Close() })
	return c, w, h, welcome
}

func TestASilentPeerIsDeclaredDead(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// The worker beats: the connection lives past several timeouts.
	_, coord, worker, _ := pair(t, pairOpts{
		coord:  Options{HeartbeatTimeout: timeout},
		worker: Options{HeartbeatInterval: timeout / 10},
	})
	time.Sleep(3 * timeout)
	if err := coord.Err(); err != nil {
		t.Fatalf("a beating worker was declared dead: %v", err)
	}
	if coord.Beats() == 0 {
		t.Fatal("no heartbeat arrived")
	}
	// A frozen worker (SIGSTOP looks like this: the socket stays open,
	// nothing comes) is declared dead within about the timeout.
	// start is before the connection exists, so no correct declaration
	// can come less than the timeout after it.
	start := time.Now()
	_, coord2, _, _ := pair(t, pairOpts{coord: Options{HeartbeatTimeout: timeout}})
	select {
	case <-coord2.Done():
	case <-time.After(20 * timeout):
		t.Fatal("a silent worker was never declared dead")
	}
	if !errors.Is(coord2.Err(), ErrPeerSilent) {
		t.Fatalf("closed with %v, want ErrPeerSilent", coord2.Err())
	}
	if d := time.Since(start); d < timeout {
		t.Fatalf("declared dead after %s, before the %s timeout", d, timeout)
	}
	_ = worker
}

func TestASchemaOtherThanTheReceiversIsRefused(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	_, coord, worker, _ := pair(t, pairOpts{coord: Options{Alloc: alloc}})
	defer coord.Close()
	defer worker.Close()
	other := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rx, err := coord.OpenReceiver(2, testSchema, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := worker.OpenSender(2, other, alloc)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(alloc)
	b.Append(1)
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(other, []arrow.Array{col}, 1)
	col.Release()
	_ = tx.Send(context.Background(), rec)
	rec.Release()
	_ = tx.End(context.Background())
	select {
	case <-coord.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a batch of another schema did not close the connection")
	}
	if !errors.Is(coord.Err(), ErrMalformed) {
		t.Fatalf("closed with %v, want a malformed-frame error", coord.Err())
	}
}

func TestVariableWidthColumnsAreRefusedAtTheSender(t *testing.T) {
	_, _, worker, _ := pair(t, pairOpts{})
	s := arrow.NewSchema([]arrow.Field{{Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	if _, err := worker.OpenSender(1, s, nil); err == nil || !strings.Contains(err.Error(), "fixed-width") {
		t.Fatalf("OpenSender with a string column: %v", err)
	}
}

func TestCloseDoesNotWaitForASilentStranger(t *testing.T) {
	l, _, _, _ := pair(t, pairOpts{})
	nc, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	time.Sleep(50 * time.Millisecond) // its handshake is under way, waiting for a Hello
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > DefaultHandshakeTimeout/2 {
		t.Fatalf("Close took %s: it waited for a silent connection's handshake", d)
	}
}

// TestAnAbandonedChannelSendsNothingMore: after Abandon the receiver gets
// what was sent before it and then nothing, no end, while the
// connection's other channels go on; the encoder's memory is released.
func TestAnAbandonedChannelSendsNothingMore(t *testing.T) {
	sendAlloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer sendAlloc.AssertSize(t, 0)
	_, coord, worker, _ := pair(t, pairOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rx, err := coord.OpenReceiver(1, testSchema, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := worker.OpenSender(1, testSchema, sendAlloc)
	if err != nil {
		t.Fatal(err)
	}
	rec := makeBatch(sendAlloc, rand.New(rand.NewPCG(1, 2)), 10)
	defer rec.Release()
	if err := tx.Send(ctx, rec); err != nil {
		t.Fatal(err)
	}
	tx.Abandon()
	if err := worker.SendControl([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if b, err := coord.Control(ctx); err != nil || string(b) != "after" {
		t.Fatalf("control after the abandon: %q, %v", b, err)
	}
	it, err := rx.Next(ctx)
	if err != nil || it.Batch == nil {
		t.Fatalf("the batch sent before the abandon: %+v, %v", it, err)
	}
	it.Batch.Release()
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if it, err := rx.Next(short); err == nil {
		t.Fatalf("an abandoned channel delivered %+v after its last batch", it)
	}
}
