package sink

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// encoder writes rows, handed over column-wise, to one data file.
type encoder interface {
	// write appends rows; cols are in layout order and of equal length.
	write(cols [][]int64) error
	// close completes the file (the Parquet footer) without closing the
	// underlying writer.
	close() error
}

// newEncoder starts a data file of format with the given columns.
func newEncoder(format Format, w io.Writer, sh *shape) (encoder, error) {
	switch format {
	case Parquet:
		return newParquetEncoder(w, sh), nil
	case CSV:
		return newCSVEncoder(w, sh.cols)
	}
	return nil, fmt.Errorf("unknown output format %q", format)
}

// encodeFile writes one complete data file holding the given column chunks.
func encodeFile(format Format, sh *shape, chunks [][][]int64) func(io.Writer) error {
	return func(w io.Writer) error {
		enc, err := newEncoder(format, w, sh)
		if err != nil {
			return err
		}
		for _, c := range chunks {
			if err := enc.write(c); err != nil {
				return err
			}
		}
		return enc.close()
	}
}

// parquetSchema builds the Parquet schema of the layout's columns: one
// required INT64 leaf per column, in layout order, PLAIN encoded.
//
// parquet.Group would sort the fields by name, so the file's column order
// would differ from the layout's; a struct type built at run time keeps
// the order, and parquet-go derives required int64 leaves from int64 fields.
// The struct is only a schema carrier: rows are written column by column.
//
// Why PLAIN and uncompressed: the sink's flush is on the measured latency
// path of every executor, so encoding must be cheap. On job-like rows,
// Snappy halves the file but makes encoding about 7x slower, and a 1M-row
// flush 4x slower end to end on a local disk. DELTA_BINARY_PACKED would be
// both small and fast, but arrow-go v18.8.0's delta decoder never returns a
// small buffer to its allocator, so any reader of these files under a
// checked allocator (as the tests here and elsewhere use) would see a leak.
func parquetSchema(cols []string) *parquet.Schema {
	fields := make([]reflect.StructField, len(cols))
	for i, c := range cols {
		fields[i] = reflect.StructField{
			Name: "C" + strconv.Itoa(i),
			Type: reflect.TypeFor[int64](),
			Tag:  reflect.StructTag(`parquet:` + strconv.Quote(c)),
		}
	}
	return parquet.SchemaOf(reflect.New(reflect.StructOf(fields)).Interface())
}

// parquetChunk is how many values go to a column writer per call: big
// enough to amortise the call, small enough to stay in cache.
const parquetChunk = 4096

// parquetRowGroup bounds the rows per row group, and with it the encoded
// data held in memory before it reaches the file. A variable so tests can
// produce multi-row-group files cheaply.
var parquetRowGroup = 1 << 16

type parquetEncoder struct {
	w       *parquet.Writer
	vals    []parquet.Value
	inGroup int
}

func newParquetEncoder(w io.Writer, sh *shape) *parquetEncoder {
	return &parquetEncoder{
		w:    parquet.NewWriter(w, sh.pq, parquet.Compression(&parquet.Uncompressed), parquet.CreatedBy("rewind", "", "")),
		vals: make([]parquet.Value, parquetChunk),
	}
}

// write feeds each column writer directly: the values are already
// column-wise, and going through row assembly would shred and rebuild them.
//
// The values carry no levels or column index (Value.Level is left out):
// every column is a required, non-repeated leaf, so both levels are 0, and
// a column writer takes every value handed to it as its own whatever the
// index says. Calling Level per value costs about four times the rest of
// the loop; the read-back tests (parquet-go and arrow-go) would catch a
// parquet-go release that started to care.
func (e *parquetEncoder) write(cols [][]int64) error {
	n := len(cols[0])
	for off := 0; off < n; {
		m := min(n-off, parquetChunk, parquetRowGroup-e.inGroup)
		cws := e.w.ColumnWriters()
		for c, col := range cols {
			vals := e.vals[:m]
			for i, v := range col[off : off+m] {
				vals[i] = parquet.Int64Value(v)
			}
			if got, err := cws[c].WriteRowValues(vals); err != nil {
				return fmt.Errorf("encoding parquet column %d: %w", c, err)
			} else if got != m {
				return fmt.Errorf("encoding parquet column %d: wrote %d of %d rows", c, got, m)
			}
		}
		off += m
		e.inGroup += m
		if e.inGroup == parquetRowGroup {
			if err := e.w.Flush(); err != nil {
				return fmt.Errorf("flushing parquet row group: %w", err)
			}
			e.inGroup = 0
		}
	}
	return nil
}

func (e *parquetEncoder) close() error {
	if err := e.w.Close(); err != nil {
		return fmt.Errorf("closing parquet file: %w", err)
	}
	return nil
}

// csvEncoder writes a header line and plain decimal rows. Values are
// integers, so no field ever needs quoting; newShape keeps names free of
// commas, quotes and line breaks, so the header needs none either.
type csvEncoder struct {
	w   io.Writer
	buf []byte
}

func newCSVEncoder(w io.Writer, cols []string) (*csvEncoder, error) {
	if _, err := io.WriteString(w, strings.Join(cols, ",")+"\n"); err != nil {
		return nil, fmt.Errorf("writing csv header: %w", err)
	}
	return &csvEncoder{w: w, buf: make([]byte, 0, 64<<10)}, nil
}

func (e *csvEncoder) write(cols [][]int64) error {
	n := len(cols[0])
	last := len(cols) - 1
	for r := 0; r < n; r++ {
		for c, col := range cols {
			e.buf = strconv.AppendInt(e.buf, col[r], 10)
			if c < last {
				e.buf = append(e.buf, ',')
			}
		}
		e.buf = append(e.buf, '\n')
		if len(e.buf) >= 60<<10 {
			if _, err := e.w.Write(e.buf); err != nil {
				return fmt.Errorf("writing csv rows: %w", err)
			}
			e.buf = e.buf[:0]
		}
	}
	return nil
}

func (e *csvEncoder) close() error {
	if len(e.buf) > 0 {
		if _, err := e.w.Write(e.buf); err != nil {
			return fmt.Errorf("writing csv rows: %w", err)
		}
		e.buf = e.buf[:0]
	}
	return nil
}
