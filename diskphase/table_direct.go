package diskphase

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"unsafe"

	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// The direct encoder writes a table's Parquet file itself instead of going
// through parquet-go's writers. A table is only ever required int64
// columns, and for those the PLAIN encoding of a page is the column's
// values as little-endian bytes, which is how they already sit in memory:
// the encoder writes each page straight from the column slice (compressing
// it first when a codec is set). parquet-go's GenericWriter instead copies
// every value four times (rows in, columns out, page buffer, column chunk
// buffer) and costs about three times the CPU
// (BenchmarkEncode); on a loaded machine that CPU was what kept
// materialisation under 70% of a plain write (docs/diskphase.md).
//
// The file is ordinary Parquet: format version 1, data page V1 with a CRC32
// of each page, no statistics, no dictionary, one PLAIN data page per
// directPageValues values. parquet-go's format types and thrift compact
// encoder produce the headers and the footer; readers are parquet-go
// (decodeTable) and arrow-go's pqarrow (TestTableReadableByPqarrow).

// directPageValues is the values per data page: 256 KiB of int64s, the
// page size parquet-go's writer aims at by default.
const directPageValues = 32 << 10

var parquetMagic = []byte("PAR1")

// littleEndian says whether the machine's int64s are already PLAIN bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// directWriter tracks the output offset while it writes a file.
type directWriter struct {
	w      io.Writer
	off    int64
	header bytes.Buffer
	enc    *thrift.Encoder
	plain  []byte // scratch for big-endian machines
	comp   []byte // scratch for compressed pages
}

func (d *directWriter) write(p []byte) error {
	n, err := d.w.Write(p)
	d.off += int64(n)
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// encodeDirect writes cols (equal lengths, in the order of names) as one
// Parquet file to w. Arguments are checked by encodeTable.
func encodeDirect(w io.Writer, names []string, cols [][]int64, codec compress.Codec, opt encodeOptions) error {
	d := &directWriter{w: w}
	d.enc = thrift.NewEncoder(new(thrift.CompactProtocol).NewWriter(&d.header))
	if err := d.write(parquetMagic); err != nil {
		return fmt.Errorf("encoding table: %w", err)
	}
	n := len(cols[0])
	compressed := codec.CompressionCodec() != format.Uncompressed
	// midWrite comes once half of all values have been written (at the
	// end for an empty table).
	mid, written := opt.midWriteAt(int64(n)*int64(len(cols))/2), int64(0)
	var groups []format.RowGroup
	for start := 0; start < n; start += rowGroupRows {
		end := min(start+rowGroupRows, n)
		rg := format.RowGroup{NumRows: int64(end - start), FileOffset: d.off, Ordinal: int16(len(groups))}
		for c, col := range cols {
			cc, err := d.writeChunk(names[c], col[start:end], codec, compressed)
			if err != nil {
				return fmt.Errorf("encoding table: column %q: %w", names[c], err)
			}
			rg.Columns = append(rg.Columns, cc)
			rg.TotalByteSize += cc.MetaData.TotalUncompressedSize
			rg.TotalCompressedSize += cc.MetaData.TotalCompressedSize
			written += int64(end - start)
			if err := mid.progress(written); err != nil {
				return err
			}
		}
		groups = append(groups, rg)
	}
	if err := mid.end(); err != nil {
		return err
	}
	schema := make([]format.SchemaElement, 0, len(names)+1)
	schema = append(schema, format.SchemaElement{Name: "schema", NumChildren: thrift.New(int32(len(names)))})
	for _, name := range names {
		schema = append(schema, format.SchemaElement{
			Name:           name,
			Type:           thrift.New(format.Int64),
			RepetitionType: thrift.New(format.Required),
		})
	}
	meta := format.FileMetaData{
		Version:   1,
		Schema:    schema,
		NumRows:   int64(n),
		RowGroups: groups,
		CreatedBy: "rewind-diskphase",
	}
	d.header.Reset()
	if err := d.enc.Encode(&meta); err != nil {
		return fmt.Errorf("encoding table: footer: %w", err)
	}
	footer := binary.LittleEndian.AppendUint32(d.header.Bytes(), uint32(d.header.Len()))
	footer = append(footer, parquetMagic...)
	if err := d.write(footer); err != nil {
		return fmt.Errorf("encoding table: %w", err)
	}
	return nil
}

// encodedBound is at least the bytes encodeDirect writes for rows rows
// of these columns, so a table's buffer is sized once: a bytes.Buffer
// that runs out doubles, and a chunk of 16 MB would take 32. Headers and
// the footer are thrift compact encodings, whose fields take at most a
// byte of header and 10 bytes of value (an int64 varint); the margins
// below cover the fields this encoder writes, with room to spare. A
// compressed page may be larger than its values: Snappy's worst case is
// n + n/6 + 32 bytes, Zstd's under that.
func encodedBound(names []string, rows int, compressed bool) int {
	const (
		fileFixed   = 12 + 128 // the magic twice, the footer's length, the file's own fields
		perPage     = 64       // a data page's header
		perGroup    = 96       // a row group's own fields
		perColumn   = 160      // a column chunk's fields in the footer, its name aside
		perSchemaEl = 32       // a schema element, its name aside
	)
	ncols := len(names)
	nameBytes := 0
	for _, n := range names {
		nameBytes += len(n)
	}
	groups := (rows + rowGroupRows - 1) / rowGroupRows
	full, rem := rows/rowGroupRows, rows%rowGroupRows
	pages := ncols * (full*(rowGroupRows/directPageValues) + (rem+directPageValues-1)/directPageValues)
	data := rows * ncols * 8
	if compressed {
		data += data/6 + pages*64
	}
	return fileFixed + len("rewind-diskphase") + (ncols+1)*perSchemaEl + nameBytes +
		groups*(perGroup+ncols*perColumn+nameBytes) + pages*perPage + data
}

// writeChunk writes one column chunk of vals as PLAIN data pages and
// returns its metadata.
func (d *directWriter) writeChunk(name string, vals []int64, codec compress.Codec, compressed bool) (format.ColumnChunk, error) {
	md := format.ColumnMetaData{
		Type:           format.Int64,
		Encoding:       []format.Encoding{format.Plain},
		PathInSchema:   []string{name},
		Codec:          codec.CompressionCodec(),
		NumValues:      int64(len(vals)),
		DataPageOffset: d.off,
	}
	for start := 0; start < len(vals); start += directPageValues {
		page := vals[start:min(start+directPageValues, len(vals))]
		body := d.plainBytes(page)
		rawSize := len(body)
		if compressed {
			var err error
			d.comp, err = codec.Encode(d.comp[:0], body)
			if err != nil {
				return format.ColumnChunk{}, fmt.Errorf("compressing: %w", err)
			}
			body = d.comp
		}
		h := format.PageHeader{
			Type:                 format.DataPage,
			UncompressedPageSize: int32(rawSize),
			CompressedPageSize:   int32(len(body)),
			CRC:                  int32(crc32.ChecksumIEEE(body)),
			DataPageHeader: thrift.New(format.DataPageHeader{
				NumValues:               int32(len(page)),
				Encoding:                format.Plain,
				DefinitionLevelEncoding: format.RLE,
				RepetitionLevelEncoding: format.RLE,
			}),
		}
		d.header.Reset()
		if err := d.enc.Encode(&h); err != nil {
			return format.ColumnChunk{}, err
		}
		hlen := int64(d.header.Len())
		if err := d.write(d.header.Bytes()); err != nil {
			return format.ColumnChunk{}, err
		}
		if err := d.write(body); err != nil {
			return format.ColumnChunk{}, err
		}
		md.TotalUncompressedSize += hlen + int64(rawSize)
		md.TotalCompressedSize += hlen + int64(len(body))
	}
	return format.ColumnChunk{FileOffset: md.DataPageOffset, MetaData: md}, nil
}

// plainBytes is vals PLAIN-encoded: the values' own memory on a
// little-endian machine, a converted copy otherwise.
func (d *directWriter) plainBytes(vals []int64) []byte {
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vals))), len(vals)*8)
	}
	d.plain = d.plain[:0]
	for _, v := range vals {
		d.plain = binary.LittleEndian.AppendUint64(d.plain, uint64(v))
	}
	return d.plain
}
