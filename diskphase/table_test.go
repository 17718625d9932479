package diskphase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func randomCols(rng *rand.Rand, ncols, n int) [][]int64 {
	cols := make([][]int64, ncols)
	for c := range cols {
		cols[c] = make([]int64, n)
		for i := range cols[c] {
			cols[c][i] = rng.Int64N(1<<40) - 1<<39
		}
	}
	return cols
}

func colNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("col_%d", n-i) // not alphabetical in order
	}
	return out
}

// TestTableRoundTrip writes tables of every width through every encoder
// and every codec and reads them back with the package's decoder.
func TestTableRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ncols := range []int{1, 3, 4, 7, 8, 9} {
		for _, n := range []int{0, 1, 5, encodeChunk + 3, rowGroupRows + 17} {
			for _, comp := range []Compression{CompressionNone, CompressionSnappy, compressionSnappyBetter, CompressionZstd} {
				for _, enc := range encoders {
					if n > encodeChunk && enc != encoderDirect && (comp != CompressionNone || ncols%4 != 0) {
						continue // large tables: one codec, the widths either side of the generic limit
					}
					name := fmt.Sprintf("cols=%d/rows=%d/%s/%s", ncols, n, comp, enc)
					cols := randomCols(rng, ncols, n)
					names := colNames(ncols)
					var buf bytes.Buffer
					mid := 0
					err := encodeTable(&buf, names, cols, encodeOptions{compression: comp, encoder: enc,
						midWrite: func() error { mid++; return nil }})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if mid != 1 {
						t.Fatalf("%s: midWrite called %d times, want 1", name, mid)
					}
					alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
					got := make([][]int64, ncols)
					rows, err := decodeTable(buf.Bytes(), int64Schema(names), alloc, func(b arrow.RecordBatch) error {
						for c := range got {
							got[c] = append(got[c], b.Column(c).(*array.Int64).Int64Values()...)
						}
						return nil
					})
					if err != nil {
						t.Fatalf("%s: decode: %v", name, err)
					}
					if rows != int64(n) {
						t.Fatalf("%s: decoded %d rows, want %d", name, rows, n)
					}
					for c := range cols {
						if n > 0 && !equalInt64s(got[c], cols[c]) {
							t.Fatalf("%s: column %d differs", name, c)
						}
					}
					alloc.AssertSize(t, 0)
				}
			}
		}
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTableReadableByPqarrow checks that an independent reader (arrow-go's
// own pqarrow) reads the files with the right schema: the column names in
// the table's order, int64, non-nullable, and the same values.
func TestTableReadableByPqarrow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, comp := range []Compression{CompressionNone, CompressionSnappy, compressionSnappyBetter, CompressionZstd} {
		names := []string{"key", "window_start", "count", "sum", "_version"}
		n := rowGroupRows + 1000
		cols := randomCols(rng, len(names), n)
		var buf bytes.Buffer
		if err := encodeTable(&buf, names, cols, encodeOptions{compression: comp}); err != nil {
			t.Fatal(err)
		}
		alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
		tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(buf.Bytes()), nil, pqarrow.ArrowReadProperties{}, alloc)
		if err != nil {
			t.Fatalf("%s: pqarrow: %v", comp, err)
		}
		schema := tbl.Schema()
		if schema.NumFields() != len(names) {
			t.Fatalf("%s: pqarrow schema %v", comp, schema)
		}
		for i, f := range schema.Fields() {
			if f.Name != names[i] || f.Type.ID() != arrow.INT64 || f.Nullable {
				t.Fatalf("%s: field %d is %v, want non-nullable int64 %q", comp, i, f, names[i])
			}
		}
		if tbl.NumRows() != int64(n) {
			t.Fatalf("%s: %d rows, want %d", comp, tbl.NumRows(), n)
		}
		for c := range names {
			var got []int64
			for _, chunk := range tbl.Column(c).Data().Chunks() {
				got = append(got, chunk.(*array.Int64).Int64Values()...)
			}
			if !equalInt64s(got, cols[c]) {
				t.Fatalf("%s: column %s differs", comp, names[c])
			}
		}
		tbl.Release()
		alloc.AssertSize(t, 0)
	}
}

func TestTableEncodingIsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cols := randomCols(rng, 4, 50_000)
	names := []string{"id", "key", "value", "ts"}
	var a, b bytes.Buffer
	if err := encodeTable(&a, names, cols, encodeOptions{compression: DefaultCompression}); err != nil {
		t.Fatal(err)
	}
	if err := encodeTable(&b, names, cols, encodeOptions{compression: DefaultCompression}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two encodings of the same table differ")
	}
}

func TestTableDecodeRejectsDamage(t *testing.T) {
	names := []string{"a", "b"}
	cols := [][]int64{{1, 2, 3}, {4, 5, 6}}
	var buf bytes.Buffer
	if err := encodeTable(&buf, names, cols, encodeOptions{}); err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	// Truncated.
	_, err := decodeTable(buf.Bytes()[:buf.Len()/2], int64Schema(names), alloc, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, errBadTable) {
		t.Fatalf("truncated table: err %v", err)
	}
	// A flipped byte inside a data page: the page CRC catches it.
	big := [][]int64{make([]int64, 1000), make([]int64, 1000)}
	for i := range big[0] {
		big[0][i], big[1][i] = int64(i), int64(-i)
	}
	buf.Reset()
	if err := encodeTable(&buf, names, big, encodeOptions{}); err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(buf.Bytes())
	flipped[len(flipped)/4] ^= 0x10 // inside column a's page
	_, err = decodeTable(flipped, int64Schema(names), alloc, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, errBadTable) {
		t.Fatalf("flipped byte: err %v", err)
	}
	// Wrong schema.
	_, err = decodeTable(buf.Bytes(), int64Schema([]string{"a", "c"}), alloc, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, errBadTable) {
		t.Fatalf("wrong schema: err %v", err)
	}
	alloc.AssertSize(t, 0)
	// Bad names.
	if err := encodeTable(&buf, []string{"a,b"}, [][]int64{{1}}, encodeOptions{}); err == nil {
		t.Fatal("a comma in a column name was accepted")
	}
}

// TestEncodedBoundHoldsTheFile: a buffer of encodedBound bytes holds the
// encoded file whatever its rows, widths, names and codec (incompressible
// values), so materialise never regrows it; and the bound is close, so the
// buffer is not much larger than the file.
func TestEncodedBoundHoldsTheFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	long := make([]string, 8)
	for i := range long {
		long[i] = fmt.Sprintf("a_rather_long_column_name_of_forty_chars%d", i)
	}
	widths := [][]string{{"k"}, colNames(4), long}
	sizes := []int{0, 1, 1000, directPageValues, directPageValues + 1, rowGroupRows, rowGroupRows + 1, 3*rowGroupRows + 5}
	for _, comp := range []Compression{CompressionNone, CompressionSnappy, CompressionZstd} {
		for _, names := range widths {
			for _, rows := range sizes {
				if comp != CompressionNone && rows > rowGroupRows+1 {
					continue // compressing tens of MB adds nothing the smaller sizes do not check
				}
				what := fmt.Sprintf("%s/%d columns/%d rows", comp, len(names), rows)
				cols := make([][]int64, len(names))
				for c := range cols {
					cols[c] = make([]int64, rows)
					for i := range cols[c] {
						cols[c][i] = int64(rng.Uint64())
					}
				}
				bound := encodedBound(names, rows, comp != CompressionNone)
				buf := bytes.NewBuffer(make([]byte, 0, bound))
				if err := encodeTable(buf, names, cols, encodeOptions{compression: comp}); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if buf.Len() > bound || cap(buf.Bytes()) != bound {
					t.Fatalf("%s: encoded %d bytes, bound %d (buffer grew to %d)", what, buf.Len(), bound, cap(buf.Bytes()))
				}
				// The margin is headers' worth: well under 1% of the values
				// plus a few KiB for the footer (and the codec's worst case).
				slack := 4096 + rows*len(names)*8/100
				if comp != CompressionNone {
					slack += rows * len(names) * 8 / 6
				}
				if bound-buf.Len() > slack {
					t.Fatalf("%s: bound %d for %d bytes encoded: a buffer far larger than the file", what, bound, buf.Len())
				}
			}
		}
	}
}
