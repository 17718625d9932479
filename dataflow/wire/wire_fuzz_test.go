package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// streamBytes is a well-formed stream after the handshake: credit, a
// channel's schema, batches, a barrier, a control message, a heartbeat,
// the end.
func streamBytes(t testing.TB) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Write(KindCredit, 1, credit(2)))
	pw := &payloadWriter{send: func(kind Kind, n int, body func(io.Writer) error) error {
		return w.WriteStreamed(kind, 1, n, body)
	}}
	iw := ipc.NewWriterWithPayloadWriter(pw, ipc.WithSchema(testSchema))
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 2; i++ {
		rec := makeBatch(memory.DefaultAllocator, rng, 3+i)
		must(iw.Write(rec))
		rec.Release()
	}
	must(iw.Close())
	must(w.Write(KindBarrier, 1, []byte("cp 1")))
	must(w.Write(KindControl, 0, []byte(`{"ack":1}`)))
	must(w.Write(KindHeartbeat, 0, make([]byte, 16)))
	must(w.Write(KindEnd, 1))
	must(w.Flush())
	return buf.Bytes()
}

// batchAsSchema is the stream's credit, then its first batch relabelled
// as the channel's schema: a schema frame holding a record batch message
// (once a use of a released message).
func batchAsSchema(good []byte) []byte {
	credit := headerLen + 4 + trailerLen
	schemaLen := int(binary.LittleEndian.Uint32(good[credit+8:]))
	batch := credit + headerLen + schemaLen + trailerLen
	batchLen := int(binary.LittleEndian.Uint32(good[batch+8:]))
	out := append(bytes.Clone(good[:credit]), good[batch:batch+headerLen+batchLen+trailerLen]...)
	out[credit+2] = byte(KindSchema)
	return out
}

// FuzzConnFrames feeds bytes to a connection's read loop, as a broken or
// hostile peer would send them after the handshake: the connection must
// end with an error or the stream's end, never a panic, and every byte it
// allocated must come back.
func FuzzConnFrames(f *testing.F) {
	good := streamBytes(f)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:headerLen+3])
	flipped := bytes.Clone(good)
	flipped[len(flipped)/3] ^= 0x40
	f.Add(flipped)
	f.Add(batchAsSchema(good))
	f.Add([]byte("RW\x07\x01\x01\x00\x00\x00\xff\xff\xff\x7f"))
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	{
		alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
		local, remote := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, remote) }() // credits the conn writes
		c := newConn(local, NewReader(local, 1<<20), NewWriter(local), Options{Alloc: alloc, MaxFrame: 1 << 20, Log: func(string, ...any) {}}.withDefaults())
		var rxs []*Receiver
		for ch := uint32(0); ch < 3; ch++ {
			rx, err := c.OpenReceiver(ch, nil, 2)
			if err != nil {
				t.Fatal(err)
			}
			rxs = append(rxs, rx)
		}
		go func() {
			_, _ = remote.Write(data)
			_ = remote.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// Drain what arrives, taking control messages too, until the
		// connection ends.
		go func() {
			for {
				if _, err := c.Control(ctx); err != nil {
					return
				}
			}
		}()
		for _, rx := range rxs {
			for {
				it, err := rx.Next(ctx)
				if err != nil || it.End {
					break
				}
				if it.Batch != nil {
					it.Batch.Release()
				}
			}
		}
		select {
		case <-c.Done():
		case <-ctx.Done():
			t.Fatal("the connection did not end when its peer's stream did")
		}
		if c.Err() == nil {
			t.Fatal("done without a reason")
		}
		_ = c.Close()
		for _, rx := range rxs {
			rx.Close()
		}
		alloc.AssertSize(t, 0)
	}
}

// FuzzHandshake feeds bytes to the listener's handshake: a refusal or an
// error, never a panic, and nothing but a Hello with the token accepted.
func FuzzHandshake(f *testing.F) {
	hello, _ := json.Marshal(Hello{Token: "t0ken", Worker: "w", Protocol: Protocol})
	var buf bytes.Buffer
	w := NewWriter(&buf)
	_ = w.Write(KindHello, 0, hello)
	_ = w.Flush()
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:10])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &Listener{cfg: ListenConfig{Token: "t0ken", HandshakeTimeout: 2 * time.Second, Conn: Options{Log: func(string, ...any) {}}.withDefaults()}}
		local, remote := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, remote) }()
		go func() {
			_, _ = remote.Write(data)
			_ = remote.Close()
		}()
		c, h, err := l.handshake(local)
		if err == nil {
			if h.Token != "t0ken" {
				t.Fatalf("accepted a hello with token %q", h.Token)
			}
			_ = c.Close()
		} else if errors.Is(err, ErrRefused) {
			t.Fatalf("listener-side error wraps the dialer's ErrRefused: %v", err)
		}
		_ = local.Close()
		_ = remote.Close()
	})
}
