package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

// FuzzParseRow: the push feed's and the CSV reader's row parser accepts a
// line exactly when it is four comma-separated int64 fields (spaces around
// a field allowed), and gives those values; the values printed back parse
// the same.
func FuzzParseRow(f *testing.F) {
	f.Add([]byte("1,2,3,4"))
	f.Add([]byte(" -9223372036854775808 ,0,+7,9223372036854775807"))
	f.Add([]byte("1,2,3"))
	f.Add([]byte("1,2,3,4,5"))
	f.Add([]byte("1,2,0x3,4"))
	f.Fuzz(func(t *testing.T, line []byte) {
		var row [4]int64
		msg := parseRow(line, &row)
		fields := strings.Split(string(line), ",")
		var want [4]int64
		ok := len(fields) == 4
		for i := 0; ok && i < 4; i++ {
			v, err := strconv.ParseInt(strings.TrimSpace(fields[i]), 10, 64)
			want[i], ok = v, err == nil
		}
		if ok != (msg == "") {
			t.Fatalf("parseRow(%q) = %q, strconv says ok=%v", line, msg, ok)
		}
		if !ok {
			return
		}
		if row != want {
			t.Fatalf("parseRow(%q) = %v, want %v", line, row, want)
		}
		var again [4]int64
		if m := parseRow(fmt.Appendf(nil, "%d,%d,%d,%d", row[0], row[1], row[2], row[3]), &again); m != "" || again != row {
			t.Fatalf("%v printed does not parse back: %q %v", row, m, again)
		}
	})
}

// FuzzOpenGenSpec: a gen: spec either opens a source whose partitions can
// be read from their start, or fails with one line naming the spec's
// problem; never a panic or a huge allocation.
func FuzzOpenGenSpec(f *testing.F) {
	for _, s := range []string{"", "records=10", "records=1e3,keys=5,parts=3,seed=7", "records=5,skew=1.2,disorder=4",
		"rate=100,records=2", "parts=0", "records=-1", "keys=1,keys=2", "bogus=1", "records=1.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		src, err := Open("gen:"+body, Options{DefaultSeed: 1})
		if err != nil {
			if msg := err.Error(); msg == "" || strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		defer src.Close()
		if src.Spec() != "gen:"+body || len(src.Partitions()) == 0 {
			t.Fatalf("opened %q as %q with %d partitions", body, src.Spec(), len(src.Partitions()))
		}
	})
}

// FuzzFileSource: bytes given as a CSV or Parquet input file either fail
// to open with one line of error, or read as rows in which any position
// reached can be reopened and reads the same rest (the file source is
// re-readable); reads end in io.EOF or an error, never a panic, a leak or
// an allocation sized by a count the file cannot hold.
func FuzzFileSource(f *testing.F) {
	f.Add(false, []byte(csvHeader+"\n1,2,3,4\n\n5,6,7,8\n"))
	f.Add(false, []byte(csvHeader+"\r\n1,2,3,4"))
	f.Add(false, []byte(csvHeader+"\n1,2,x,4\n"))
	f.Add(false, []byte("id,key\n"))
	type row struct {
		ID    int64 `parquet:"id"`
		Key   int64 `parquet:"key"`
		Value int64 `parquet:"value"`
		TS    int64 `parquet:"ts"`
	}
	for _, n := range []int{0, 3} {
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf)
		for i := range n {
			if _, err := w.Write([]row{{int64(i), 2, int64(-i), 9}}); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(true, buf.Bytes())
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, isParquet bool, data []byte) {
		path := filepath.Join(dir, "in.csv")
		if isParquet {
			path = filepath.Join(dir, "in.parquet")
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		before := heapAllocated()
		src, err := Open("file:"+path, Options{})
		if a := heapAllocated() - before; a > 64<<20+1024*uint64(len(data)) {
			t.Fatalf("opening a %d-byte file allocated %d bytes", len(data), a)
		}
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		defer src.Close()
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		name := src.Partitions()[0]
		all, positions, err := readFrom(t, src, Position{}, mem)
		if err != nil {
			return
		}
		for i, pos := range positions {
			if pos.Partition != name {
				t.Fatalf("position %+v names another partition than %q", pos, name)
			}
			rest, _, err := readFrom(t, src, pos, mem)
			if err != nil {
				t.Fatalf("reopening at %+v: %v", pos, err)
			}
			if !slices.Equal(rest, all[pos.Offset:]) {
				t.Fatalf("reopened at position %d (batch %d), read %d rows, want %d", pos.Offset, i, len(rest), len(all[pos.Offset:]))
			}
		}
	})
}

// readFrom reads the first partition of src from pos to its end in
// batches of 2 rows, returning the rows and the position after each
// batch.
func readFrom(t *testing.T, src Source, pos Position, mem memory.Allocator) ([][4]int64, []Position, error) {
	r, err := src.Open(context.Background(), 0, pos, mem)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var rows [][4]int64
	var after []Position
	for range 1000 {
		b, p, err := r.Next(context.Background(), 2)
		if errors.Is(err, io.EOF) {
			return rows, after, nil
		}
		if err != nil {
			return rows, after, err
		}
		for i := range int(b.NumRows()) {
			var v [4]int64
			for c := range 4 {
				v[c] = b.Column(c).(*array.Int64).Value(i)
			}
			rows = append(rows, v)
		}
		b.Release()
		if p.Offset != pos.Offset+int64(len(rows)) {
			t.Fatalf("position %d after %d rows read from %d", p.Offset, len(rows), pos.Offset)
		}
		after = append(after, p)
	}
	return rows, after, errors.New("more than 1000 batches")
}

// heapAllocated is the bytes the Go heap has handed out so far: parquet-go
// allocates with make, so the fuzz body bounds it from outside.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
