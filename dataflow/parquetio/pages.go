package parquetio

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ErrBadPage is wrapped by every refusal of vetPages.
var ErrBadPage = errors.New("damaged Parquet page header")

// parquet-go allocates the uncompressed size a page header claims (up to
// 2 GiB) before it reads the page, so a damaged header costs that much
// memory before the page is refused. vetPages walks every page header of
// every column chunk first, reading only the headers, and refuses sizes no
// writer produces. The bounds:
const (
	// maxPageSize caps any page, compressed or not. Writers cut pages at
	// 1 MiB (parquet-mr, pyarrow) or less (parquet-go 8 KiB, the disk
	// phase 8192 values); 256 MiB leaves room for unusual writers.
	maxPageSize = 256 << 20
	// pageSizeFloor is allowed for any page, whatever its codec claims:
	// small enough to cost nothing, large enough that frame overheads of
	// tiny pages never matter.
	pageSizeFloor = 64 << 10
	// firstHeaderRead is the bytes read for a page header at first; a
	// header with statistics needs more and is read again, doubling, up
	// to maxHeaderSize (a header's statistics hold at most two values).
	firstHeaderRead = 256
	maxHeaderSize   = 16 << 20
)

// maxRatio is the most a codec's format can expand its input, so
// UncompressedPageSize may be at most maxRatio*CompressedPageSize (or
// pageSizeFloor). Zero means the format has no useful bound and only
// maxPageSize applies.
func maxRatio(c format.CompressionCodec) int64 {
	switch c {
	case format.Snappy:
		// A snappy copy element costs >= 2 bytes for <= 64 bytes out
		// (3 bytes for 64): at most 64/3 ~ 21.3.
		return 32
	case format.Gzip:
		// Deflate's maximum is 258 bytes per ~2 bits: 1032:1.
		return 1032
	case format.Lz4, format.Lz4Raw:
		// LZ4 spends one byte per 255 bytes of match length: ~255:1.
		return 256
	case format.Zstd:
		// Every zstd block of <= 128 KiB costs >= 4 bytes (an RLE block:
		// 3-byte header, 1 byte): 131072/4 = 32768.
		return 32768
	default:
		// Brotli can encode a 16 MiB copy in a few bytes; LZO and unknown
		// codecs are left to parquet-go to refuse.
		return 0
	}
}

// vetPages checks every page header of every column chunk of meta (a file
// of size bytes read through r) before parquet-go reads a page. offsets is
// the file's offset index when parquet-go loaded it (one per column chunk,
// row group by row group), else nil: seeking jumps to the page locations it
// lists, so each must be the start of a page the walk vetted.
func vetPages(r io.ReaderAt, size int64, meta *format.FileMetaData, offsets []format.OffsetIndex) error {
	v := pageVetter{r: r, size: size}
	k := 0
	for g := range meta.RowGroups {
		for c := range meta.RowGroups[g].Columns {
			cc := &meta.RowGroups[g].Columns[c]
			if len(cc.EncryptedColumnMetadata) > 0 {
				// Encrypted headers cannot be read without the key, which
				// the engine never has: parquet-go refuses these itself.
				k++
				continue
			}
			err := v.chunk(&cc.MetaData)
			if err == nil && k < len(offsets) {
				err = v.locations(offsets[k].PageLocations)
			}
			if err != nil {
				return fmt.Errorf("%w: row group %d, column %d: %v", ErrBadPage, g, c, err)
			}
			k++
		}
	}
	return nil
}

// locations checks that each page location is where the last chunk's walk
// found a page header.
func (v *pageVetter) locations(locs []format.PageLocation) error {
	for i, l := range locs {
		if _, ok := slices.BinarySearch(v.starts, l.Offset); !ok {
			return fmt.Errorf("offset index: page %d at offset %d is not a page of the column chunk", i, l.Offset)
		}
	}
	return nil
}

// pageVetter holds what one file's walk reuses from page to page.
type pageVetter struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	// starts are the offsets of the last chunk's page headers, ascending.
	starts []int64
	br     *boundedReader
	dec    *thrift.Decoder
}

// chunk walks the pages of one column chunk as parquet-go will: from the
// dictionary page offset if set, else the data page offset, through
// TotalCompressedSize bytes.
func (v *pageVetter) chunk(md *format.ColumnMetaData) error {
	start := md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		start = md.DictionaryPageOffset
	}
	v.starts = v.starts[:0]
	if md.TotalCompressedSize == 0 {
		return nil
	}
	if start < 4 || md.TotalCompressedSize < 0 || md.TotalCompressedSize > v.size-start {
		return fmt.Errorf("chunk of %d bytes at offset %d in a %d-byte file", md.TotalCompressedSize, start, v.size)
	}
	ratio := maxRatio(md.Codec)
	pos, end := start, start+md.TotalCompressedSize
	for page := 0; pos < end; page++ {
		v.starts = append(v.starts, pos)
		h, n, err := v.header(pos, end)
		if err != nil {
			return fmt.Errorf("page %d at offset %d: %v", page, pos, err)
		}
		pos += n
		comp, unc := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		switch {
		case comp < 0 || unc < 0:
			return fmt.Errorf("page %d: negative size (%d compressed, %d uncompressed)", page, comp, unc)
		case comp > end-pos:
			return fmt.Errorf("page %d: %d bytes run past its column chunk (%d left)", page, comp, end-pos)
		case comp > maxPageSize || unc > maxPageSize:
			return fmt.Errorf("page %d: %d bytes (%d uncompressed) exceed the %d-byte page cap", page, comp, unc, maxPageSize)
		case md.Codec == format.Uncompressed && unc != comp:
			return fmt.Errorf("page %d: uncompressed page claims %d bytes, holds %d", page, unc, comp)
		case ratio > 0 && unc > max(pageSizeFloor, ratio*comp):
			return fmt.Errorf("page %d: %d bytes cannot decompress to %d with %s", page, comp, unc, md.Codec)
		}
		pos += comp
	}
	return nil
}

// header decodes the page header at pos (before end), returning it and its
// encoded length. It reads a small window first and doubles it while the
// header does not fit, so no length in the header can make it read or
// allocate more than the chunk holds (or maxHeaderSize).
func (v *pageVetter) header(pos, end int64) (*format.PageHeader, int64, error) {
	for want := int64(firstHeaderRead); ; want *= 2 {
		n := min(want, end-pos, maxHeaderSize)
		if int64(cap(v.buf)) < n {
			v.buf = make([]byte, n)
		}
		b := v.buf[:n]
		if k, err := v.r.ReadAt(b, pos); k < len(b) {
			return nil, 0, fmt.Errorf("reading the page header: %w", err)
		}
		if v.br == nil {
			v.br = &boundedReader{BytesReader: new(thrift.CompactProtocol).NewReaderFromBytes(nil)}
			v.dec = thrift.NewDecoder(v.br)
		}
		v.br.ResetBytes(b)
		v.br.n = len(b)
		// A zero header each time, so no field of the previous page's
		// survives where this header lacks it. Its byte fields alias b.
		h := new(format.PageHeader)
		err := v.dec.Decode(h)
		if err == nil {
			return h, int64(v.br.BytesRead()), nil
		}
		if n == end-pos || n == maxHeaderSize {
			return nil, 0, fmt.Errorf("decoding the page header: %v", err)
		}
	}
}

// boundedReader refuses a thrift list, set or map with more elements than
// bytes left: each element takes at least one byte, and the decoder
// allocates the claimed size before reading an element.
type boundedReader struct {
	thrift.BytesReader
	n int
}

func (r *boundedReader) left() int { return r.n - r.BytesRead() }

func (r *boundedReader) ReadList() (thrift.List, error) {
	l, err := r.BytesReader.ReadList()
	if err == nil && int(l.Size) > r.left() {
		return l, io.ErrUnexpectedEOF
	}
	return l, err
}

func (r *boundedReader) ReadSet() (thrift.Set, error) {
	s, err := r.BytesReader.ReadSet()
	if err == nil && int(s.Size) > r.left() {
		return s, io.ErrUnexpectedEOF
	}
	return s, err
}

func (r *boundedReader) ReadMap() (thrift.Map, error) {
	m, err := r.BytesReader.ReadMap()
	if err == nil && int(m.Size) > r.left() {
		return m, io.ErrUnexpectedEOF
	}
	return m, err
}
