package diskphase

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/s2"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rewind-engine/rewind/dataflow/parquetio"
)

// A table is what every materialised file holds: named, required int64
// columns. Map outputs, reduce outputs and carried state are all tables;
// only the column names differ, and they differ per job. Tables are
// encoded into memory and published as one storage object each, so a
// reader sees the whole file or nothing.
//
// Encoding goes through the direct encoder (table_direct.go), which writes
// PLAIN pages straight from the column slices. Two encoders through
// parquet-go's writers are kept for the benchmarks that justify it: the
// GenericWriter path, where rows are copied into a struct with one int64
// field per column (the widths below) whose Go field names are renamed to
// the table's column names with StructTag options, and the column-buffer
// path (WriteInt64s into parquet.Buffer columns).

// Compression names the codecs the benchmarks compare; see docs/diskphase.md
// for why DefaultCompression is the default.
type Compression string

const (
	CompressionNone   Compression = "none"
	CompressionSnappy Compression = "snappy"
	CompressionZstd   Compression = "zstd"
)

// compressionSnappyBetter is parquet-go's own Snappy codec, which calls
// klauspost's snappy.Encode: the slower "better" block encoder. Kept for
// the benchmarks that justify fastSnappy.
const compressionSnappyBetter Compression = "snappy-better"

// fastSnappy is the SNAPPY Parquet codec with s2's fast snappy-compatible
// block encoder: any Snappy reader decodes it.
type fastSnappy struct{}

func (fastSnappy) String() string                            { return "SNAPPY" }
func (fastSnappy) CompressionCodec() format.CompressionCodec { return format.Snappy }
func (fastSnappy) Encode(dst, src []byte) ([]byte, error) {
	return s2.EncodeSnappy(dst[:cap(dst)], src), nil
}
func (fastSnappy) Decode(dst, src []byte) ([]byte, error) {
	return s2.Decode(dst[:cap(dst)], src)
}

// DefaultCompression is the codec materialised files are written with on
// local storage.
const DefaultCompression = CompressionNone

// defaultCompressionFor picks the codec for a store. Materialised files are
// written once, read once or twice and deleted, so what matters is the time
// to write and read them. On a local disk (measured in bench_test.go on this
// project's machine) uncompressed files materialise at the disk's rate and
// read back fastest; fast Snappy would cost about a third of the throughput
// to save 60% of the bytes. Over the network to an S3 store, bytes are the
// bottleneck and Snappy's 0.4 size ratio wins, at an encoding speed still
// well above typical object-store bandwidth; Zstd compresses to 0.16 but
// encodes at well under 100 MB/s on one core here.
func defaultCompressionFor(storeURL string) Compression {
	if strings.HasPrefix(storeURL, "s3://") {
		return CompressionSnappy
	}
	return DefaultCompression
}

func (c Compression) codec() (compress.Codec, error) {
	switch c {
	case CompressionNone, "":
		return &parquet.Uncompressed, nil
	case CompressionSnappy:
		return fastSnappy{}, nil
	case compressionSnappyBetter:
		return &parquet.Snappy, nil
	case CompressionZstd:
		return &parquet.Zstd, nil
	}
	return nil, fmt.Errorf("unknown compression %q (allowed: none, snappy, zstd)", c)
}

// rowGroupRows bounds the rows of one row group, and so the rows of one
// batch a reader decodes at a time.
const rowGroupRows = 1 << 17

// encodeChunk is how many rows are transposed into structs per Write call.
const encodeChunk = 2048

// maxGenericColumns is the widest table the GenericWriter path handles;
// wider tables use the column-buffer path.
const maxGenericColumns = 8

type (
	row1 struct{ C0 int64 }
	row2 struct{ C0, C1 int64 }
	row3 struct{ C0, C1, C2 int64 }
	row4 struct{ C0, C1, C2, C3 int64 }
	row5 struct{ C0, C1, C2, C3, C4 int64 }
	row6 struct{ C0, C1, C2, C3, C4, C5 int64 }
	row7 struct{ C0, C1, C2, C3, C4, C5, C6 int64 }
	row8 struct{ C0, C1, C2, C3, C4, C5, C6, C7 int64 }
)

// encoder selects how encodeTable produces the file.
type encoder int

const (
	encoderDirect        encoder = iota // table_direct.go; the default
	encoderGeneric                      // parquet-go GenericWriter (benchmarks and tests)
	encoderColumnBuffers                // parquet-go Buffer + WriteRowGroup (benchmarks and tests)
)

var encoders = []encoder{encoderDirect, encoderGeneric, encoderColumnBuffers}

func (e encoder) String() string {
	switch e {
	case encoderDirect:
		return "direct"
	case encoderGeneric:
		return "generic"
	case encoderColumnBuffers:
		return "colbuf"
	}
	return fmt.Sprintf("encoder(%d)", int(e))
}

// encodeOptions tune encodeTable.
type encodeOptions struct {
	compression Compression
	// midWrite, when set, is called once after about half of the rows
	// have been handed to the encoder (after the first chunk for tiny
	// tables): the place a crash leaves a half-written file behind.
	midWrite func() error
	// encoder is the encoder; the zero value is the direct one.
	encoder encoder
}

// midWriteHook calls encodeOptions.midWrite exactly once: when progress
// first reaches the threshold, or at the end if it never does.
type midWriteHook struct {
	fn        func() error
	threshold int64
}

func (o encodeOptions) midWriteAt(threshold int64) *midWriteHook {
	return &midWriteHook{fn: o.midWrite, threshold: threshold}
}

// progress reports how far the encoder has come.
func (h *midWriteHook) progress(done int64) error {
	if h.fn == nil || done < h.threshold {
		return nil
	}
	fn := h.fn
	h.fn = nil
	return fn()
}

// end calls the hook if progress never reached the threshold.
func (h *midWriteHook) end() error { return h.progress(h.threshold) }

// checkNames rejects column names a struct tag cannot carry.
func checkNames(names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, ",\"` \t\r\n") {
			return fmt.Errorf("column name %q cannot be written: names must be non-empty without commas, quotes or spaces", n)
		}
		if seen[n] {
			return fmt.Errorf("column %q appears twice", n)
		}
		seen[n] = true
	}
	return nil
}

// encodeTable writes one Parquet file holding cols (equal lengths, in the
// order of names) to w.
func encodeTable(w io.Writer, names []string, cols [][]int64, opt encodeOptions) error {
	if len(names) == 0 || len(names) != len(cols) {
		return fmt.Errorf("encoding table: %d names for %d columns", len(names), len(cols))
	}
	for _, c := range cols[1:] {
		if len(c) != len(cols[0]) {
			return fmt.Errorf("encoding table: columns of unequal length")
		}
	}
	if err := checkNames(names); err != nil {
		return err
	}
	codec, err := opt.compression.codec()
	if err != nil {
		return err
	}
	if opt.encoder == encoderDirect {
		return encodeDirect(w, names, cols, codec, opt)
	}
	base := []parquet.WriterOption{
		parquet.Compression(codec),
		parquet.CreatedBy("rewind-diskphase", "", ""),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		// The output is an in-memory buffer already: a write buffer in
		// front of it would only add a copy.
		parquet.WriteBufferSize(0),
	}
	if opt.encoder == encoderColumnBuffers || len(names) > maxGenericColumns {
		return encodeColumnBuffers(w, names, cols, base, opt)
	}
	switch len(names) {
	case 1:
		return encodeGeneric[row1](w, names, cols, base, opt)
	case 2:
		return encodeGeneric[row2](w, names, cols, base, opt)
	case 3:
		return encodeGeneric[row3](w, names, cols, base, opt)
	case 4:
		return encodeGeneric[row4](w, names, cols, base, opt)
	case 5:
		return encodeGeneric[row5](w, names, cols, base, opt)
	case 6:
		return encodeGeneric[row6](w, names, cols, base, opt)
	case 7:
		return encodeGeneric[row7](w, names, cols, base, opt)
	default:
		return encodeGeneric[row8](w, names, cols, base, opt)
	}
}

// encodeGeneric is the GenericWriter path. T is a struct of exactly
// len(names) int64 fields, so a []T is laid out as rows of int64s and can
// be filled through an []int64 view.
func encodeGeneric[T any](w io.Writer, names []string, cols [][]int64, base []parquet.WriterOption, opt encodeOptions) error {
	ncols := len(names)
	var zero T
	if unsafe.Sizeof(zero) != uintptr(ncols)*8 {
		return fmt.Errorf("encoding table: row type of %d bytes for %d columns", unsafe.Sizeof(zero), ncols)
	}
	opts := append([]parquet.WriterOption(nil), base...)
	for i, n := range names {
		opts = append(opts, parquet.StructTag(reflect.StructTag(`parquet:"`+n+`"`), "C"+strconv.Itoa(i)))
	}
	pw := parquet.NewGenericWriter[T](w, opts...)
	n := len(cols[0])
	rows := make([]T, min(n, encodeChunk))
	var flat []int64
	if len(rows) > 0 {
		flat = unsafe.Slice((*int64)(unsafe.Pointer(&rows[0])), len(rows)*ncols)
	}
	mid := opt.midWriteAt(int64(n / 2))
	for off := 0; off < n; {
		m := min(n-off, len(rows))
		for c, col := range cols {
			src := col[off : off+m]
			for i, v := range src {
				flat[i*ncols+c] = v
			}
		}
		if _, err := pw.Write(rows[:m]); err != nil {
			return fmt.Errorf("encoding table: %w", err)
		}
		off += m
		if err := mid.progress(int64(off)); err != nil {
			return err
		}
	}
	if err := mid.end(); err != nil {
		return err
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("encoding table: closing: %w", err)
	}
	return nil
}

// parquetSchemaOf builds a schema of required int64 leaves in the given
// order (parquet.Group would sort them by name).
func parquetSchemaOf(names []string) *parquet.Schema {
	fields := make([]reflect.StructField, len(names))
	for i, n := range names {
		fields[i] = reflect.StructField{
			Name: "C" + strconv.Itoa(i),
			Type: reflect.TypeFor[int64](),
			Tag:  reflect.StructTag(`parquet:"` + n + `"`),
		}
	}
	return parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Interface())
}

// encodeColumnBuffers is the column-buffer path: values are copied into
// the int64 column buffers of a parquet.Buffer, one row group at a time.
func encodeColumnBuffers(w io.Writer, names []string, cols [][]int64, base []parquet.WriterOption, opt encodeOptions) error {
	schema := parquetSchemaOf(names)
	opts := append([]parquet.WriterOption{schema}, base...)
	pw := parquet.NewWriter(w, opts...)
	n := len(cols[0])
	buf := parquet.NewBuffer(schema)
	mid := opt.midWriteAt(1) // after the first row group
	for off := 0; off < n; {
		m := min(n-off, rowGroupRows)
		buf.Reset()
		for c, cb := range buf.ColumnBuffers() {
			iw, ok := cb.(parquet.Int64Writer)
			if !ok {
				return fmt.Errorf("encoding table: column buffer %T takes no int64s", cb)
			}
			if _, err := iw.WriteInt64s(cols[c][off : off+m]); err != nil {
				return fmt.Errorf("encoding table: %w", err)
			}
		}
		if _, err := pw.WriteRowGroup(buf); err != nil {
			return fmt.Errorf("encoding table: %w", err)
		}
		off += m
		if err := mid.progress(int64(off)); err != nil {
			return err
		}
	}
	if err := mid.end(); err != nil {
		return err
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("encoding table: closing: %w", err)
	}
	return nil
}

// int64Schema is the Arrow schema of a table with these columns.
func int64Schema(names []string) *arrow.Schema {
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		fields[i] = arrow.Field{Name: n, Type: arrow.PrimitiveTypes.Int64}
	}
	return arrow.NewSchema(fields, nil)
}

// errBadTable wraps decoding failures caused by the bytes themselves.
var errBadTable = errors.New("malformed table")

// decodeTable reads a table written by encodeTable (or any Parquet file of
// required or optional-without-nulls int64 columns with these names, in any
// order) and hands each row group to fn as an Arrow batch with the columns
// in schema order. fn borrows the batch. Memory comes from alloc.
func decodeTable(data []byte, schema *arrow.Schema, alloc memory.Allocator, fn func(arrow.RecordBatch) error) (int64, error) {
	f, err := parquetio.OpenFile(bytes.NewReader(data), int64(len(data)),
		parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errBadTable, err)
	}
	fields := f.Schema().Fields()
	if len(fields) != schema.NumFields() {
		return 0, fmt.Errorf("%w: %d columns, want %d (%v)", errBadTable, len(fields), schema.NumFields(), schema)
	}
	// perm[j] is the schema position of file column j: a permutation, so a
	// name given twice (and another missing) is refused, not decoded into
	// a batch with a column missing.
	perm := make([]int, len(fields))
	seen := make([]bool, schema.NumFields())
	for j, fd := range fields {
		idx := schema.FieldIndices(fd.Name())
		if len(idx) != 1 || !fd.Leaf() || fd.Repeated() || !parquetio.IsInt64(fd.Type()) {
			return 0, fmt.Errorf("%w: column %q does not match %v", errBadTable, fd.Name(), schema)
		}
		if seen[idx[0]] {
			return 0, fmt.Errorf("%w: column %q appears twice", errBadTable, fd.Name())
		}
		seen[idx[0]] = true
		perm[j] = idx[0]
	}
	var total int64
	var generic []parquet.Value
	for _, rg := range f.RowGroups() {
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		arrs := make([]arrow.Array, len(fields))
		release := func() {
			for _, a := range arrs {
				if a != nil {
					a.Release()
				}
			}
		}
		chunks := rg.ColumnChunks()
		if len(chunks) != len(fields) {
			return total, fmt.Errorf("%w: a row group has %d columns, the schema %d", errBadTable, len(chunks), len(fields))
		}
		for j, cc := range chunks {
			// n is the file's claim, so memory follows the values the
			// pages hold: sized for PLAIN pages of this file (exact for an
			// uncompressed table), grown by doubling past that.
			buf := memory.NewResizableBuffer(alloc)
			buf.Resize(int(min(n, int64(len(data)/8+1))) * 8)
			var vals []int64
			vals, generic, err = parquetio.Int64ChunkGrow(cc, n, func(k int) []int64 {
				if k*8 > buf.Len() {
					buf.Resize(int(min(n, int64(max(k, 2*buf.Len()/8)))) * 8)
				}
				return arrow.Int64Traits.CastFromBytes(buf.Bytes())
			}, generic)
			if err == nil {
				buf.Resize(len(vals) * 8)
			}
			if err != nil {
				buf.Release()
				release()
				return total, fmt.Errorf("%w: column %q: %v", errBadTable, fields[j].Name(), err)
			}
			d := array.NewData(arrow.PrimitiveTypes.Int64, int(n), []*memory.Buffer{nil, buf}, nil, 0, 0)
			arrs[perm[j]] = array.NewInt64Data(d)
			d.Release()
			buf.Release()
		}
		b := array.NewRecordBatch(schema, arrs, n)
		release()
		err := fn(b)
		b.Release()
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
