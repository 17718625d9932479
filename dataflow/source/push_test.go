package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// chunkOf makes a queued chunk of records with ids first..first+n-1.
func chunkOf(first, n int64) pushChunk {
	var c pushChunk
	for i := first; i < first+n; i++ {
		c.add(&[4]int64{i, i % 7, i % 100, i})
	}
	return c
}

// nextRows calls Next once and returns the rows and position.
func nextRows(t *testing.T, r Reader, max int) ([]row, Position) {
	t.Helper()
	b, pos, err := r.Next(context.Background(), max)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	defer b.Release()
	return rowsOf(t, b), pos
}

// TestPushLostAccounting drives the hand-over queue directly, without a
// connection, so chunk boundaries (and so what a crash loses) are exact.
func TestPushLostAccounting(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	s := &PushSource{spec: "test", changed: make(chan struct{}), bounded: true}
	defer s.Close()
	s.enqueue(chunkOf(0, 100))
	s.enqueue(chunkOf(100, 50))

	r, err := s.Open(ctx, 0, Position{Partition: PushPartition}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost() != 0 {
		t.Fatalf("fresh reader Lost %d", r.Lost())
	}
	rows, pos := nextRows(t, r, 10)
	if len(rows) != 10 || rows[9][0] != 9 || pos.Offset != 10 {
		t.Fatalf("first batch %d rows, last id %d, pos %v", len(rows), rows[len(rows)-1][0], pos)
	}
	// The reader took the whole first chunk: 100 handed over, 90 unread.
	if h := s.Head(); h != 100 {
		t.Fatalf("head %d, want 100", h)
	}
	// Crash: the reader goes away with 90 records in its buffer. Reopening at
	// the last position it returned loses exactly those 90.
	r.Close()
	r, err = s.Open(ctx, 0, pos, mem)
	if err != nil {
		t.Fatal(err)
	}
	if r.Lost() != 90 {
		t.Fatalf("Lost %d after crash at 10 with head 100, want 90", r.Lost())
	}
	rows, pos = nextRows(t, r, 1000)
	if len(rows) != 50 || rows[0][0] != 100 || pos.Offset != 150 {
		t.Fatalf("after reopen: %d rows from id %d, pos %v; want 50 rows from id 100 at 150", len(rows), rows[0][0], pos)
	}
	// Reopening at an older recovery point (5) loses [5,150), but [10,100)
	// was reported already: 145 - 90 = 55 more.
	r2, err := s.Open(ctx, 0, Position{Partition: PushPartition, Offset: 5}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Lost() != 55 {
		t.Fatalf("Lost %d reopening at 5 with head 150 after [10,100) was lost, want 55", r2.Lost())
	}
	// Opening replaced the previous reader.
	_, _, err = r.Next(ctx, 1)
	wantErr(t, err, "replaced")
	r.Close()
	// At the head nothing is lost.
	r2.Close()
	r3, err := s.Open(ctx, 0, Position{Partition: PushPartition, Offset: 150}, mem)
	if err != nil {
		t.Fatal(err)
	}
	if r3.Lost() != 0 {
		t.Fatalf("Lost %d at the head", r3.Lost())
	}
	_, err = s.Open(ctx, 0, Position{Partition: PushPartition, Offset: 151}, mem)
	wantErr(t, err, "position 151 is ahead of the 150 records handed over")
	_, err = s.Open(ctx, 0, Position{Partition: "p0"}, mem)
	wantErr(t, err, `names partition "p0"`)
	r3, err = s.Open(ctx, 0, Position{Partition: PushPartition, Offset: 150}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	s.finish(nil)
	if b, pos, err := r3.Next(ctx, 10); !errors.Is(err, io.EOF) || b != nil || pos.Offset != 150 {
		t.Fatalf("end of feed: %v %v %v", b, pos, err)
	}
}

func TestPushGenerated(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := mustOpen(t, "push:records=20000,keys=50,seed=3,disorder=5", Options{})
	defer src.Close()
	if src.Rereadable() || !src.Bounded() || !slices.Equal(src.Partitions(), []string{"push"}) {
		t.Fatalf("rereadable %v bounded %v partitions %v", src.Rereadable(), src.Bounded(), src.Partitions())
	}
	got := openRead(t, src, mem, 0, 0, 333)
	// The pushed records are the generator's: one partition, same params.
	want := readGen(t, mustOpen(t, "gen:records=20000,partitions=1,keys=50,seed=3,disorder=5", Options{}), mem, 4096)[0]
	if !slices.Equal(got, want) {
		t.Fatalf("pushed %d rows differ from the generator's %d", len(got), len(want))
	}
	if h := src.(*PushSource).Head(); h != 20000 {
		t.Fatalf("head %d", h)
	}
}

// TestPushCrashTotal runs a model engine over a generated push feed with
// random crashes: its state is the list of ids it has applied, a recovery
// point saves (state length, position), and a crash truncates the state to
// the recovery point and reopens there. In the end the records in the state
// plus the records reported lost equal the records pushed, and the lost ones
// are exactly the ids missing from the state.
func TestPushCrashTotal(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 5))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	const N = 30000
	src := mustOpen(t, fmt.Sprintf("push:records=%d,seed=%d", N, rng.Int64()), Options{})
	defer src.Close()
	ps := src.(*PushSource)

	var state []int64
	reported := make([]bool, N) // the model's record of ids reported lost
	newlyLost := func(lo, hi int64) int64 {
		var n int64
		for i := lo; i < hi; i++ {
			if !reported[i] {
				reported[i] = true
				n++
			}
		}
		return n
	}
	var cpLen int
	cpPos := Position{Partition: PushPartition}
	var lost int64
	r, err := src.Open(ctx, 0, cpPos, mem)
	if err != nil {
		t.Fatal(err)
	}
	last := cpPos
	crashes := 0
	for {
		b, pos, err := r.Next(ctx, 1+rng.IntN(500))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("seed=%d: %v", seed, err)
		}
		for _, rw := range rowsOf(t, b) {
			state = append(state, rw[0])
		}
		b.Release()
		last = pos
		switch x := rng.IntN(20); {
		case x == 0: // recovery point
			cpLen, cpPos = len(state), pos
		case x == 1: // crash, restart from the recovery point
			r.Close()
			head := ps.Head()
			state = state[:cpLen]
			if r, err = src.Open(ctx, 0, cpPos, mem); err != nil {
				t.Fatalf("seed=%d: %v", seed, err)
			}
			// head - recovery point, less what an earlier restart from the
			// same recovery point already reported.
			if want := newlyLost(cpPos.Offset, head); r.Lost() != want {
				t.Fatalf("seed=%d: Lost %d, want %d (head %d, recovery point %d)", seed, r.Lost(), want, head, cpPos.Offset)
			}
			lost += r.Lost()
			crashes++
		case x == 2: // crash, restart from the last position returned
			r.Close()
			head := ps.Head()
			cpLen, cpPos = len(state), last
			if r, err = src.Open(ctx, 0, last, mem); err != nil {
				t.Fatalf("seed=%d: %v", seed, err)
			}
			newlyLost(last.Offset, head)
			if r.Lost() != head-last.Offset {
				t.Fatalf("seed=%d: Lost %d, want records handed over after %d: %d", seed, r.Lost(), last.Offset, head-last.Offset)
			}
			lost += r.Lost()
			crashes++
		}
	}
	r.Close()
	t.Logf("seed=%d: %d crashes, %d records kept, %d lost", seed, crashes, len(state), lost)
	if int64(len(state))+lost != N {
		t.Fatalf("seed=%d: kept %d + lost %d != pushed %d", seed, len(state), lost, N)
	}
	if !slices.IsSorted(state) {
		t.Fatalf("seed=%d: state ids not in feed order", seed)
	}
	if len(state) > 0 && (state[0] < 0 || state[len(state)-1] >= N) {
		t.Fatalf("seed=%d: ids out of range", seed)
	}
	for i := 1; i < len(state); i++ {
		if state[i] == state[i-1] {
			t.Fatalf("seed=%d: id %d applied twice", seed, state[i])
		}
	}
	// The ids reported lost are exactly the ids missing from the state.
	inState := make([]bool, N)
	for _, id := range state {
		inState[id] = true
	}
	for id := range N {
		if inState[id] == reported[id] {
			t.Fatalf("seed=%d: id %d: in state %v, reported lost %v", seed, id, inState[id], reported[id])
		}
	}
}

// pushLines connects to addr, writes text and closes the connection.
func pushLines(t *testing.T, addr, text string) chan error {
	done := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			done <- err
			return
		}
		_, err = io.WriteString(c, text)
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	return done
}

func TestPushListen(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := mustOpen(t, "push:listen=127.0.0.1:0", Options{})
	defer src.Close()
	ps := src.(*PushSource)
	if src.Rereadable() || !src.Bounded() {
		t.Fatal("listen feed: not re-readable, bounded by the pusher's EOF")
	}
	if !strings.HasPrefix(ps.Addr(), "127.0.0.1:") {
		t.Fatalf("addr %s", ps.Addr())
	}
	var b strings.Builder
	var want []row
	b.WriteString(csvHeader + "\n")
	for i := int64(0); i < 5000; i++ {
		want = append(want, row{i, i % 13, i%100 - 10, 1000 + i})
		fmt.Fprintf(&b, "%d,%d,%d,%d\n", i, i%13, i%100-10, 1000+i)
		if i == 10 {
			b.WriteString("\r\n") // empty lines are skipped
		}
	}
	b.WriteString("5000,1,2,3") // the last line may lack a newline
	want = append(want, row{5000, 1, 2, 3})
	done := pushLines(t, ps.Addr(), b.String())
	got := openRead(t, src, mem, 0, 0, 700)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	// One pusher per feed: the listener is gone after the first.
	if c, err := net.Dial("tcp", ps.Addr()); err == nil {
		c.Close()
		t.Fatal("a second pusher could connect")
	}
}

func TestPushMalformed(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	for _, tc := range []struct{ text, phrase string }{
		{"1,2,3,4\n5,6,x,8\n9,9,9,9\n", `pushed line 2 is malformed: field value="x" is not an int64`},
		{csvHeader + "\n1,2,3,4\n1,2,3\n", "pushed line 3 is malformed: 3 fields, want 4"},
		{"1,2,3,4\n" + strings.Repeat("7", maxLine+10) + "\n", "pushed line 2 is longer than"},
	} {
		src := mustOpen(t, "push:listen=localhost:0", Options{})
		done := pushLines(t, src.(*PushSource).Addr(), tc.text)
		r, err := src.Open(ctx, 0, Position{}, mem)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for {
			b, pos, err := r.Next(ctx, 100)
			if err != nil {
				wantErr(t, err, tc.phrase)
				if pos.Offset != 1 || n != 1 {
					t.Fatalf("error at position %d after %d rows, want the good row first", pos.Offset, n)
				}
				break
			}
			n += b.NumRows()
			b.Release()
		}
		r.Close()
		<-done // the write may fail once the feed stops reading; either is fine
		src.Close()
	}
}

func TestPushCloseAndCancel(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src, err := Open("push:listen=[::1]:0", Options{})
	if err != nil {
		// A host without IPv6 loopback; the IPv4 forms are tested elsewhere.
		t.Skipf("no IPv6 loopback: %v", err)
	}
	r, err := src.Open(context.Background(), 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	// Waiting for a pusher honours ctx.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, _, err := r.Next(ctx, 10); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	// Close wakes a waiting reader.
	go func() { _, _, err := r.Next(context.Background(), 10); errc <- err }()
	src.Close()
	wantErr(t, <-errc, "source closed")
	r.Close()
	_, err = src.Open(context.Background(), 0, Position{}, mem)
	wantErr(t, err, "source closed")
	if err := src.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPushEndlessClose(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := mustOpen(t, "push:records=0,seed=9", Options{})
	if src.Bounded() {
		t.Fatal("records=0 push feed must be unbounded")
	}
	r, err := src.Open(context.Background(), 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for n < 50000 {
		b, _, err := r.Next(context.Background(), 4096)
		if err != nil {
			t.Fatal(err)
		}
		n += b.NumRows()
		b.Release()
	}
	r.Close()
	// The pusher is blocked on a full queue now; Close must stop it (goleak
	// in TestMain checks).
	src.Close()
}

func TestPushPaced(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	clk := newFakeClock()
	start := clk.Now()
	src := mustOpen(t, "push:records=3000,rate=200", clk.options(1))
	defer src.Close()
	rows := openRead(t, src, mem, 0, 0, 100)
	if len(rows) != 3000 {
		t.Fatalf("read %d rows", len(rows))
	}
	if adv := clk.Now().Sub(start); adv != 15*time.Second {
		t.Fatalf("pusher at 200/s advanced the fake clock by %v for 3000 records, want 15s", adv)
	}
}
