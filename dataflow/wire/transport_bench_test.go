package wire

// BenchmarkTransport moves record batches between two processes on
// loopback, the way worker processes will: this test binary re-executes
// itself as the sending process. Three ways, in one run:
//
//   - wire: this package (Arrow IPC messages in checksummed frames, credit
//     flow control);
//   - flight: Arrow Flight DoPut over gRPC, the other candidate;
//   - tcp-copy: the same number of bytes written raw to a TCP socket, the
//     ceiling.
//
// Every batch is 65,536 rows of three int64 columns (1.5 MiB), the shape of
// rewind's keyed records. Reproduce:
//
//	go test -run '^$' -bench BenchmarkTransport -benchtime 400x ./dataflow/wire/

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	benchRows  = 1 << 16
	benchBytes = benchRows * 3 * 8
	childEnv   = "REWIND_WIRE_BENCH_CHILD" // mode,addr,token,batches
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := benchChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, "wire bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func BenchmarkTransport(b *testing.B) {
	for _, mode := range []string{"wire", "flight", "tcp-copy"} {
		b.Run(mode, func(b *testing.B) { benchParent(b, mode) })
	}
}

func startChild(b *testing.B, mode, addr, token string) *exec.Cmd {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s,%d", childEnv, mode, addr, token, b.N))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func benchParent(b *testing.B, mode string) {
	b.SetBytes(benchBytes)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	alloc := memory.NewGoAllocator()
	switch mode {
	case "wire":
		token, _ := NewToken()
		l, err := Listen("", ListenConfig{Token: token, Conn: Options{Alloc: alloc}})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		startChild(b, mode, l.Addr(), token)
		c, _, err := l.Accept(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ResetTimer()
		rx, err := c.OpenReceiver(1, nil, 8)
		if err != nil {
			b.Fatal(err)
		}
		defer rx.Close()
		rows := 0
		for {
			it, err := rx.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if it.End {
				break
			}
			if it.Batch != nil {
				rows += int(it.Batch.NumRows())
				it.Batch.Release()
			}
		}
		b.StopTimer()
		if rows != b.N*benchRows {
			b.Fatalf("received %d rows, sent %d", rows, b.N*benchRows)
		}
	case "flight":
		done := make(chan int, 1)
		srv := flight.NewServerWithMiddleware(nil)
		if err := srv.Init("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		srv.RegisterFlightService(&putServer{done: done, alloc: alloc})
		go func() { _ = srv.Serve() }()
		defer srv.Shutdown()
		b.ResetTimer()
		startChild(b, mode, srv.Addr().String(), "")
		select {
		case rows := <-done:
			b.StopTimer()
			if rows != b.N*benchRows {
				b.Fatalf("received %d rows, sent %d", rows, b.N*benchRows)
			}
		case <-ctx.Done():
			b.Fatal("flight transfer did not finish")
		}
	case "tcp-copy":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		startChild(b, mode, ln.Addr().String(), "")
		nc, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		b.ResetTimer()
		n, err := io.Copy(io.Discard, nc)
		b.StopTimer()
		if err != nil || n != int64(b.N)*benchBytes {
			b.Fatalf("copied %d bytes (%v), sent %d", n, err, int64(b.N)*benchBytes)
		}
	}
}

type putServer struct {
	flight.BaseFlightServer
	done  chan int
	alloc memory.Allocator
}

func (s *putServer) DoPut(stream flight.FlightService_DoPutServer) error {
	r, err := flight.NewRecordReader(stream, ipc.WithAllocator(s.alloc))
	if err != nil {
		return err
	}
	defer r.Release()
	rows := 0
	for r.Next() {
		rows += int(r.RecordBatch().NumRows())
	}
	s.done <- rows
	return r.Err()
}

// benchChild is the sending process.
func benchChild(spec string) error {
	parts := strings.SplitN(spec, ",", 4)
	if len(parts) != 4 {
		return fmt.Errorf("child spec %q", spec)
	}
	mode, addr, token, n := parts[0], parts[1], parts[2], parts[3]
	batches, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	rec := makeBatch(memory.DefaultAllocator, rand.New(rand.NewPCG(1, 1)), benchRows)
	defer rec.Release()
	ctx := context.Background()
	switch mode {
	case "wire":
		c, _, err := Dial(ctx, addr, Hello{Token: token, Worker: "bench"}, Options{Log: func(string, ...any) {}})
		if err != nil {
			return err
		}
		defer c.Close()
		tx, err := c.OpenSender(1, testSchema, nil)
		if err != nil {
			return err
		}
		for i := 0; i < batches; i++ {
			if err := tx.Send(ctx, rec); err != nil {
				return err
			}
		}
		if err := tx.End(ctx); err != nil {
			return err
		}
		<-c.Done() // the parent closes once it has everything
		return nil
	case "flight":
		cl, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer cl.Close()
		stream, err := cl.DoPut(ctx)
		if err != nil {
			return err
		}
		w := flight.NewRecordWriter(stream, ipc.WithSchema(testSchema))
		for i := 0; i < batches; i++ {
			if err := w.Write(rec); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := stream.CloseSend(); err != nil {
			return err
		}
		_, _ = stream.Recv()
		return nil
	case "tcp-copy":
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		buf := make([]byte, benchBytes)
		for i := 0; i < batches; i++ {
			if _, err := nc.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}
