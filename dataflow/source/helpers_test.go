package source

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/goleak"

	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// TestMain fails the package if any test leaves a goroutine behind: push
// sources own goroutines and listeners that Close must stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// row is one input row: id, key, value, ts.
type row [4]int64

// rowsOf copies a batch's rows, checking its schema.
func rowsOf(t testing.TB, b arrow.RecordBatch) []row {
	t.Helper()
	if !b.Schema().Equal(Schema) {
		t.Fatalf("batch schema %s, want %s", b.Schema(), Schema)
	}
	n := int(b.NumRows())
	out := make([]row, n)
	for c := 0; c < 4; c++ {
		vals := b.Column(c).(*array.Int64).Int64Values()
		if len(vals) != n {
			t.Fatalf("column %d has %d values, batch %d rows", c, len(vals), n)
		}
		for i, v := range vals {
			out[i][c] = v
		}
	}
	return out
}

// readAll reads r to EOF in batches of at most max rows and returns the rows
// and the final position. It checks that every batch is non-empty, at most
// max rows, and that positions advance by the batch size.
func readAll(t testing.TB, r Reader, start int64, max int) ([]row, Position) {
	t.Helper()
	var out []row
	off := start
	for {
		b, pos, err := r.Next(context.Background(), max)
		if errors.Is(err, io.EOF) {
			if b != nil {
				t.Fatalf("EOF with a batch")
			}
			if pos.Offset != off {
				t.Fatalf("EOF position %d, want %d", pos.Offset, off)
			}
			return out, pos
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		n := b.NumRows()
		if n == 0 || n > int64(max) {
			b.Release()
			t.Fatalf("batch of %d rows with max %d", n, max)
		}
		out = append(out, rowsOf(t, b)...)
		b.Release()
		off += n
		if pos.Offset != off {
			t.Fatalf("position %d after batch, want %d", pos.Offset, off)
		}
	}
}

// openRead opens partition i of src at offset and reads it to the end.
func openRead(t testing.TB, src Source, mem memory.Allocator, i int, offset int64, max int) []row {
	t.Helper()
	pos := Position{Partition: src.Partitions()[i], Offset: offset}
	r, err := src.Open(context.Background(), i, pos, mem)
	if err != nil {
		t.Fatalf("Open(%d, %v): %v", i, pos, err)
	}
	defer r.Close()
	rows, _ := readAll(t, r, offset, max)
	return rows
}

// mustOpen opens spec or fails the test.
func mustOpen(t testing.TB, spec string, opts Options) Source {
	t.Helper()
	s, err := Open(spec, opts)
	if err != nil {
		t.Fatalf("Open(%q): %v", spec, err)
	}
	return s
}

// wantErr fails unless err is non-nil and contains every phrase.
func wantErr(t testing.TB, err error, phrases ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", phrases)
	}
	for _, p := range phrases {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// fakeClock is a clock whose Sleep advances time instantly, so pacing can be
// tested without real waiting.
type fakeClock struct {
	mu     sync.Mutex
	t      time.Time
	sleeps int
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.t = c.t.Add(d)
	}
	c.sleeps++
	return nil
}

func (c *fakeClock) options(seed int64) Options {
	return Options{DefaultSeed: seed, Now: c.Now, Sleep: c.Sleep}
}

// testSeed returns the seed of a randomised test (testseed: REWIND_TEST_SEED
// replays a failure, and a failing test logs its seed).
func testSeed(t testing.TB) int64 {
	t.Helper()
	return int64(testseed.Seed(t))
}
