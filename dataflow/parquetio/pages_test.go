package parquetio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"runtime/metrics"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

type oneColumn struct {
	A int64 `parquet:"a"`
}

var codecs = []compress.Codec{
	&parquet.Uncompressed, &parquet.Snappy, &parquet.Gzip, &parquet.Zstd, &parquet.Lz4Raw, &parquet.Brotli,
}

// writeColumn writes vals as one int64 column with pages of up to pageSize
// bytes.
func writeColumn(t *testing.T, vals []int64, codec compress.Codec, version, pageSize int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[oneColumn](&buf, parquet.Compression(codec),
		parquet.DataPageVersion(version), parquet.PageBufferSize(pageSize))
	rows := make([]oneColumn, len(vals))
	for i, v := range vals {
		rows[i].A = v
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Files parquet-go writes pass the vetting with every codec and both data
// page versions, including the most compressible data there is (zeros,
// which brings each codec near its ratio bound) in pages of 1 MiB.
func TestVetPagesAcceptsWrittenFiles(t *testing.T) {
	const n = 1 << 17 // 1 MiB of int64
	rng := rand.New(rand.NewSource(1))
	data := map[string][]int64{"zeros": make([]int64, n), "sequence": make([]int64, n), "random": make([]int64, n)}
	for i := range n {
		data["sequence"][i] = int64(i)
		data["random"][i] = rng.Int63()
	}
	for _, codec := range codecs {
		for _, version := range []int{1, 2} {
			for name, vals := range data {
				t.Run(fmt.Sprintf("%s/v%d/%s", codec, version, name), func(t *testing.T) {
					file := writeColumn(t, vals, codec, version, 8*n)
					f, err := OpenFile(bytes.NewReader(file), int64(len(file)), parquet.SkipPageIndex(true))
					if err != nil {
						t.Fatal(err)
					}
					out := make([]int64, n)
					if _, err := Int64Chunk(f.RowGroups()[0].ColumnChunks()[0], out, nil); err != nil {
						t.Fatal(err)
					}
					for i := range out {
						if out[i] != vals[i] {
							t.Fatalf("value %d: got %d, want %d", i, out[i], vals[i])
						}
					}
				})
			}
		}
	}
}

// withFirstHeader returns file with the first page header of its first
// column chunk replaced by edit's version of it. The edited chunk is
// copied to the end of the data (the old one stays, unreferenced), so
// the header may change length without moving anything else.
func withFirstHeader(t *testing.T, file []byte, edit func(*format.PageHeader)) []byte {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)), parquet.SkipPageIndex(true))
	if err != nil {
		t.Fatal(err)
	}
	meta := f.Metadata()
	md := &meta.RowGroups[0].Columns[0].MetaData
	start := md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		start = md.DictionaryPageOffset
	}
	proto := new(thrift.CompactProtocol)
	br := proto.NewReaderFromBytes(file[start:])
	var h format.PageHeader
	if err := thrift.NewDecoder(br).Decode(&h); err != nil {
		t.Fatal(err)
	}
	oldLen := int64(br.BytesRead())
	edit(&h)
	hdr, err := thrift.Marshal(proto, &h)
	if err != nil {
		t.Fatal(err)
	}
	footerStart := int64(len(file)) - 8 - int64(binary.LittleEndian.Uint32(file[len(file)-8:]))
	out := append([]byte(nil), file[:footerStart]...)
	out = append(out, hdr...)
	out = append(out, file[start+oldLen:start+md.TotalCompressedSize]...)
	delta := int64(len(hdr)) - oldLen
	if md.DictionaryPageOffset != 0 {
		md.DictionaryPageOffset = footerStart
		md.DataPageOffset += footerStart - start + delta
	} else {
		md.DataPageOffset = footerStart
	}
	md.TotalCompressedSize += delta
	footer, err := thrift.Marshal(proto, meta)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A page header claiming sizes its page cannot have is refused by OpenFile
// (wrapping ErrBadPage), before parquet-go allocates what it claims.
func TestVetPagesRefusesDamagedHeaders(t *testing.T) {
	vals := make([]int64, 1000)
	for i := range vals {
		vals[i] = int64(i)
	}
	cases := []struct {
		name  string
		codec compress.Codec
		edit  func(*format.PageHeader)
	}{
		{"uncompressed size differs", &parquet.Uncompressed, func(h *format.PageHeader) { h.UncompressedPageSize++ }},
		{"uncompressed 1 GiB", &parquet.Uncompressed, func(h *format.PageHeader) { h.UncompressedPageSize = 1 << 30 }},
		{"snappy 1 GiB", &parquet.Snappy, func(h *format.PageHeader) { h.UncompressedPageSize = 1 << 30 }},
		{"snappy past the ratio", &parquet.Snappy, func(h *format.PageHeader) {
			h.UncompressedPageSize = max(pageSizeFloor, 32*h.CompressedPageSize) + 1
		}},
		{"zstd past the ratio", &parquet.Zstd, func(h *format.PageHeader) {
			h.UncompressedPageSize = max(pageSizeFloor, 32768*h.CompressedPageSize) + 1
		}},
		{"brotli past the cap", &parquet.Brotli, func(h *format.PageHeader) { h.UncompressedPageSize = maxPageSize + 1 }},
		{"compressed past the chunk", &parquet.Snappy, func(h *format.PageHeader) { h.CompressedPageSize += 1 << 20 }},
		{"negative size", &parquet.Snappy, func(h *format.PageHeader) { h.UncompressedPageSize = -1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file := withFirstHeader(t, writeColumn(t, vals, c.codec, 1, 1<<20), c.edit)
			before := heapAllocs()
			f, err := OpenFile(bytes.NewReader(file), int64(len(file)), parquet.SkipPageIndex(true))
			if err == nil {
				// Show what the header costs when nothing refuses it.
				_, err = Int64Chunk(f.RowGroups()[0].ColumnChunks()[0], make([]int64, len(vals)), nil)
				t.Fatalf("damaged header accepted by OpenFile (reading it: err %v, %d bytes allocated)", err, heapAllocs()-before)
			}
			if !errors.Is(err, ErrBadPage) {
				t.Fatalf("err %v, want one wrapping ErrBadPage", err)
			}
			if a := heapAllocs() - before; a > 1<<20 {
				t.Fatalf("refusing cost %d bytes of heap", a)
			}
		})
	}
	// The unedited file (re-spliced the same way) passes.
	file := withFirstHeader(t, writeColumn(t, vals, &parquet.Snappy, 1, 1<<20), func(*format.PageHeader) {})
	if _, err := OpenFile(bytes.NewReader(file), int64(len(file)), parquet.SkipPageIndex(true)); err != nil {
		t.Fatalf("unedited file refused: %v", err)
	}
}

// BenchmarkVetPages compares the header walk with reading every value of
// the same file on disk: 4 columns of 2^22 int64 (128 MiB of values),
// snappy, with parquet-go's default pages and with 8 KiB pages (many
// headers per byte).
func BenchmarkVetPages(b *testing.B) {
	for _, pageSize := range []int{0, 8 << 10} {
		b.Run(fmt.Sprintf("page=%d", pageSize), func(b *testing.B) { benchVetPages(b, pageSize) })
	}
}

func benchVetPages(b *testing.B, pageSize int) {
	const n = 1 << 22
	type row struct{ A, B, C, D int64 }
	opts := []parquet.WriterOption{parquet.Compression(&parquet.Snappy)}
	if pageSize > 0 {
		opts = append(opts, parquet.PageBufferSize(pageSize))
	}
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[row](&buf, opts...)
	rows := make([]row, 1<<16)
	rng := rand.New(rand.NewSource(1))
	for written := 0; written < n; written += len(rows) {
		for i := range rows {
			v := int64(written + i)
			rows[i] = row{v, rng.Int63(), v % 13, 0}
		}
		if _, err := w.Write(rows); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	path := b.TempDir() + "/big.parquet"
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	size := int64(buf.Len())
	f, err := parquet.OpenFile(fh, size, parquet.SkipPageIndex(true))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("vet", func(b *testing.B) {
		for range b.N {
			if err := vetPages(fh, size, f.Metadata(), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size)/1e6, "fileMB")
	})
	b.Run("read", func(b *testing.B) {
		for range b.N {
			for _, rg := range f.RowGroups() {
				for _, cc := range rg.ColumnChunks() {
					if _, err := Int64Chunk(cc, make([]int64, rg.NumRows()), nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
}

// With the page index loaded (the file source loads it, to seek), every
// page location of the offset index must be a page the walk vetted: a
// seek jumps straight to it.
func TestVetPagesChecksOffsetIndex(t *testing.T) {
	vals := make([]int64, 5000)
	for i := range vals {
		vals[i] = int64(i)
	}
	file := writeColumn(t, vals, &parquet.Snappy, 1, 1024)
	f, err := OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.OffsetIndexes()); n != 1 || len(f.OffsetIndexes()[0].PageLocations) < 2 {
		t.Fatalf("want an offset index of several pages, got %d indexes", n)
	}
	// The splice moves the chunk but not the offset index, which so points
	// at pages outside the chunk parquet-go will read.
	moved := withFirstHeader(t, file, func(*format.PageHeader) {})
	if _, err := OpenFile(bytes.NewReader(moved), int64(len(moved))); !errors.Is(err, ErrBadPage) {
		t.Fatalf("an offset index pointing outside its chunk: err %v, want ErrBadPage", err)
	}
	if _, err := OpenFile(bytes.NewReader(moved), int64(len(moved)), parquet.SkipPageIndex(true)); err != nil {
		t.Fatalf("the same file without its page index: %v", err)
	}
}
