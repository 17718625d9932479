package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"

	"github.com/rewind-engine/rewind/dataflow/parquetio"
)

// csvHeader is the only header a CSV input may have: requiring it exactly
// catches a file with reordered or misnamed columns before any row is read.
const csvHeader = "id,key,value,ts"

// maxLine bounds one CSV or pushed line; four int64 fields need < 100 bytes,
// so anything longer is malformed input, not data.
const maxLine = 64 << 10

type fileFormat int

const (
	formatCSV fileFormat = iota
	formatParquet
)

// filePart is one partition of a file source: one file.
type filePart struct {
	name   string // partition name: the file name relative to the directory
	path   string
	format fileFormat
}

// fileSource is the file: source. Files are immutable inputs (a directory
// is read as an append-only log, one partition per file), so any row can be
// read again: Rereadable and Bounded are both true. The partition list is
// fixed when the source is opened.
type fileSource struct {
	spec  string
	parts []filePart
	names []string
}

func openFile(spec, path string) (Source, error) {
	if path == "" {
		return nil, errors.New("file: empty path (want file:PATH with PATH a .csv or .parquet file or a directory of them)")
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("file: %s does not exist", path)
		}
		return nil, fmt.Errorf("file: %w", err)
	}
	var parts []filePart
	if st.IsDir() {
		ents, err := os.ReadDir(path) // sorted by name
		if err != nil {
			return nil, fmt.Errorf("file: %w", err)
		}
		for _, e := range ents {
			n := e.Name()
			if strings.HasPrefix(n, "_") || strings.HasPrefix(n, ".") {
				continue // markers and hidden files (_SUCCESS, .tmp) are not data
			}
			p := filepath.Join(path, n)
			fi, err := os.Stat(p) // follows symlinks
			if err != nil {
				return nil, fmt.Errorf("file: %w", err)
			}
			if fi.IsDir() {
				continue
			}
			parts = append(parts, filePart{name: n, path: p})
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("file: directory %s has no input files (names starting with _ or . are ignored)", path)
		}
	} else {
		parts = []filePart{{name: filepath.Base(path), path: path}}
	}
	names := make([]string, len(parts))
	for i := range parts {
		if err := parts[i].check(); err != nil {
			return nil, err
		}
		names[i] = parts[i].name
	}
	return &fileSource{spec: spec, parts: parts, names: names}, nil
}

// check detects the file's format and validates its header or schema, so a
// bad input fails when the source is opened, not half-way through a run.
func (p *filePart) check() error {
	f, err := os.Open(p.path)
	if err != nil {
		return fmt.Errorf("file: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	ext := strings.ToLower(filepath.Ext(p.path))
	if ext == ".parquet" || ext == ".pq" || (n == 4 && string(magic[:]) == "PAR1") {
		p.format = formatParquet
		pf, err := openParquet(p.path, f)
		if err != nil {
			return err
		}
		_, err = parquetColumns(p.path, pf.Schema())
		return err
	}
	p.format = formatCSV
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("file: %w", err)
	}
	return readCSVHeader(p.path, bufio.NewReaderSize(f, maxLine))
}

// Spec returns the text the source was opened from.
func (s *fileSource) Spec() string { return s.spec }

// Partitions returns the file names, sorted.
func (s *fileSource) Partitions() []string { return append([]string(nil), s.names...) }

// Rereadable is true: files are not changed once written.
func (s *fileSource) Rereadable() bool { return true }

// Bounded is true: every file ends.
func (s *fileSource) Bounded() bool { return true }

// Close has nothing to release: each reader owns its file handle.
func (s *fileSource) Close() error { return nil }

// Open opens file i at row pos.Offset. Each reader opens its own handle, so
// partitions can be read concurrently and a crashed reader leaks nothing
// shared.
func (s *fileSource) Open(ctx context.Context, i int, pos Position, alloc memory.Allocator) (Reader, error) {
	if _, err := checkOpenPos("file", s.names, i, pos); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := s.parts[i]
	if p.format == formatParquet {
		return openParquetReader(p, pos.Offset, alloc)
	}
	return openCSVReader(p, pos.Offset, alloc)
}

// ---- CSV ----

// readCSVHeader consumes and checks the header line.
func readCSVHeader(path string, br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil && err != io.EOF {
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("file: %s:1: header line longer than %d bytes (want %q)", path, maxLine, csvHeader)
		}
		return fmt.Errorf("file: %s: %w", path, err)
	}
	if len(line) == 0 {
		return fmt.Errorf("file: %s: empty file (want a header line %q)", path, csvHeader)
	}
	h := bytes.TrimPrefix(trimEOL(line), []byte("\xef\xbb\xbf")) // tolerate a UTF-8 BOM
	if string(h) != csvHeader {
		return fmt.Errorf("file: %s:1: wrong header %q (want exactly %q)", path, h, csvHeader)
	}
	return nil
}

// trimEOL strips a trailing "\n" or "\r\n".
func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// parseRow parses "id,key,value,ts" into out. It returns a message (without
// location) describing the problem, or "" when the line is valid.
func parseRow(line []byte, out *[4]int64) string {
	for i := 0; i < 4; i++ {
		var field []byte
		if i < 3 {
			c := bytes.IndexByte(line, ',')
			if c < 0 {
				return fmt.Sprintf("%d fields, want 4 (%s)", i+1, csvHeader)
			}
			field, line = line[:c], line[c+1:]
		} else {
			if bytes.IndexByte(line, ',') >= 0 {
				return fmt.Sprintf("%d fields, want 4 (%s)", 4+bytes.Count(line, []byte(",")), csvHeader)
			}
			field = line
		}
		v, ok := parseInt64(bytes.TrimSpace(field))
		if !ok {
			return fmt.Sprintf("field %s=%q is not an int64", Schema.Field(i).Name, field)
		}
		out[i] = v
	}
	return ""
}

// csvReader reads one CSV file. Empty lines are skipped and do not count as
// rows, but they do count for the line numbers in error messages.
type csvReader struct {
	f     *os.File
	br    *bufio.Reader
	part  filePart
	line  int   // number of the last line read (header = 1)
	row   int64 // rows returned so far = current position
	alloc memory.Allocator
	eof   bool
	err   error // sticky: a malformed row stops the reader
	// scratch columns, reused across calls and copied into allocator memory
	scratch [4][]int64
}

func openCSVReader(p filePart, offset int64, alloc memory.Allocator) (*csvReader, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	r := &csvReader{f: f, br: bufio.NewReaderSize(f, maxLine), part: p, alloc: alloc}
	if err := readCSVHeader(p.path, r.br); err != nil {
		f.Close()
		return nil, err
	}
	r.line = 1
	// Skip offset rows by scanning: CSV rows have no fixed width, so there
	// is no cheaper way to find row r. Rows are still validated, so the
	// reader never counts a malformed line as a row.
	var row [4]int64
	for r.row < offset {
		ok, err := r.readRow(&row)
		if err != nil {
			f.Close()
			return nil, err
		}
		if !ok {
			f.Close()
			return nil, fmt.Errorf("file: %s: position %d is beyond the end (%d rows)", p.path, offset, r.row)
		}
		r.row++
	}
	return r, nil
}

// readRow reads the next non-empty line into row. ok is false at the end of
// the file.
func (r *csvReader) readRow(row *[4]int64) (ok bool, err error) {
	for {
		if r.eof {
			return false, nil
		}
		line, err := r.br.ReadSlice('\n')
		switch {
		case err == io.EOF:
			r.eof = true
		case err == bufio.ErrBufferFull:
			return false, fmt.Errorf("file: %s:%d: line longer than %d bytes", r.part.path, r.line+1, maxLine)
		case err != nil:
			return false, fmt.Errorf("file: %s: %w", r.part.path, err)
		}
		if len(line) == 0 {
			return false, nil
		}
		r.line++
		line = trimEOL(line)
		if len(line) == 0 {
			continue
		}
		if msg := parseRow(line, row); msg != "" {
			return false, fmt.Errorf("file: %s:%d: %s", r.part.path, r.line, msg)
		}
		return true, nil
	}
}

// Next reads up to max rows.
func (r *csvReader) Next(ctx context.Context, max int) (arrow.RecordBatch, Position, error) {
	pos := Position{Partition: r.part.name, Offset: r.row}
	if r.f == nil {
		return nil, pos, errors.New("file: Next on a closed reader")
	}
	if r.err != nil {
		return nil, pos, r.err
	}
	if err := checkMax("file", max); err != nil {
		return nil, pos, err
	}
	if err := ctx.Err(); err != nil {
		return nil, pos, err
	}
	for i := range r.scratch {
		r.scratch[i] = r.scratch[i][:0]
	}
	var row [4]int64
	for len(r.scratch[0]) < max {
		ok, err := r.readRow(&row)
		if err != nil {
			// Return the rows before the bad line first; the error comes on
			// the next call, so the position still names the bad row.
			r.err = err
			break
		}
		if !ok {
			break
		}
		for i := range row {
			r.scratch[i] = append(r.scratch[i], row[i])
		}
	}
	n := len(r.scratch[0])
	if n == 0 {
		if r.err != nil {
			return nil, pos, r.err
		}
		return nil, pos, io.EOF
	}
	c := newCols(r.alloc, n)
	copy(c.id, r.scratch[0])
	copy(c.key, r.scratch[1])
	copy(c.value, r.scratch[2])
	copy(c.ts, r.scratch[3])
	r.row += int64(n)
	return c.finish(), Position{Partition: r.part.name, Offset: r.row}, nil
}

// Lost is always 0: a file forgets nothing.
func (r *csvReader) Lost() int64 { return 0 }

// Close closes the file handle.
func (r *csvReader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// ---- Parquet ----

// openParquet reads the footer of an open Parquet file.
func openParquet(path string, f *os.File) (*parquet.File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	pf, err := parquetio.OpenFile(f, st.Size(), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("file: %s: not a readable Parquet file: %w", path, err)
	}
	return pf, nil
}

// parquetColumns finds the leaf column index of id, key, value and ts and
// checks each is a non-repeated INT64, naming the first column that is
// missing or has the wrong type. Extra columns are allowed and ignored.
func parquetColumns(path string, s *parquet.Schema) ([4]int, error) {
	var idx [4]int
	for i, f := range Schema.Fields() {
		leaf, ok := s.Lookup(f.Name)
		if !ok {
			var have []string
			for _, c := range s.Columns() {
				have = append(have, strings.Join(c, "."))
			}
			return idx, fmt.Errorf("file: %s: Parquet schema has no column %q (want int64 columns %s; file has %s)",
				path, f.Name, csvHeader, strings.Join(have, ","))
		}
		if typ := leaf.Node.Type(); !parquetio.IsInt64(typ) {
			desc := typ.String()
			if k, ok := parquetio.Kind(typ); ok && k.String() != desc {
				phys := k.String()
				desc += " (physical " + phys + ")"
			}
			return idx, fmt.Errorf("file: %s: Parquet column %q has type %s, want int64", path, f.Name, desc)
		}
		if leaf.MaxRepetitionLevel > 0 {
			return idx, fmt.Errorf("file: %s: Parquet column %q is repeated, want a plain int64 column", path, f.Name)
		}
		idx[i] = leaf.ColumnIndex
	}
	return idx, nil
}

// parquetReader reads one Parquet file column by column, only the four
// columns of Schema. It positions itself by skipping whole row groups (from
// the footer's row counts, without reading their pages) and then SeekToRow
// inside the target row group, which uses the page index when the file has
// one.
type parquetReader struct {
	f      *os.File
	part   filePart
	groups []parquet.RowGroup
	colIdx [4]int
	total  int64 // rows in the file
	row    int64 // rows returned so far = current position
	alloc  memory.Allocator

	g      int   // current row group
	gLeft  int64 // rows left in the current row group
	cols   [4]parquet.ColumnChunkValueReader
	vals   []parquet.Value
	err    error // sticky
	closed bool
}

func openParquetReader(p filePart, offset int64, alloc memory.Allocator) (*parquetReader, error) {
	f, err := os.Open(p.path)
	if err != nil {
		return nil, fmt.Errorf("file: %w", err)
	}
	pf, err := openParquet(p.path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	idx, err := parquetColumns(p.path, pf.Schema())
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &parquetReader{f: f, part: p, groups: pf.RowGroups(), colIdx: idx, total: pf.NumRows(), row: offset, alloc: alloc, g: -1}
	if offset > r.total {
		f.Close()
		return nil, fmt.Errorf("file: %s: position %d is beyond the end (%d rows)", p.path, offset, r.total)
	}
	// Skip whole row groups, then seek inside the one holding row offset.
	skip := offset
	for g, rg := range r.groups {
		n := rg.NumRows()
		if skip < n {
			if err := r.openGroup(g, skip); err != nil {
				r.Close()
				return nil, err
			}
			break
		}
		skip -= n
	}
	if r.g < 0 {
		r.g = len(r.groups) // at the end
	}
	return r, nil
}

// openGroup opens value readers on row group g, positioned at row skip of
// that group.
func (r *parquetReader) openGroup(g int, skip int64) error {
	r.closeCols()
	r.g = g
	rg := r.groups[g]
	chunks := rg.ColumnChunks()
	for i, ci := range r.colIdx {
		r.cols[i] = parquet.NewColumnChunkValueReader(chunks[ci])
		if skip > 0 {
			if err := r.cols[i].SeekToRow(skip); err != nil {
				return fmt.Errorf("file: %s: seeking to row %d of row group %d: %w", r.part.path, skip, g, err)
			}
		}
	}
	r.gLeft = rg.NumRows() - skip
	return nil
}

func (r *parquetReader) closeCols() {
	for i, c := range r.cols {
		if c != nil {
			c.Close()
			r.cols[i] = nil
		}
	}
}

// Next reads up to max rows, crossing row groups as needed.
func (r *parquetReader) Next(ctx context.Context, max int) (arrow.RecordBatch, Position, error) {
	pos := Position{Partition: r.part.name, Offset: r.row}
	if r.closed {
		return nil, pos, errors.New("file: Next on a closed reader")
	}
	if r.err != nil {
		return nil, pos, r.err
	}
	if err := checkMax("file", max); err != nil {
		return nil, pos, err
	}
	if err := ctx.Err(); err != nil {
		return nil, pos, err
	}
	n := min(int64(max), r.total-r.row)
	if n <= 0 {
		return nil, pos, io.EOF
	}
	c := newCols(r.alloc, int(n))
	dst := [4][]int64{c.id, c.key, c.value, c.ts}
	if cap(r.vals) == 0 {
		r.vals = make([]parquet.Value, 4096)
	}
	var filled int64
	for filled < n {
		for r.gLeft == 0 {
			if r.g+1 >= len(r.groups) {
				c.release()
				r.err = fmt.Errorf("file: %s: row groups hold fewer rows than the footer's total %d", r.part.path, r.total)
				return nil, pos, r.err
			}
			if err := r.openGroup(r.g+1, 0); err != nil {
				c.release()
				r.err = err
				return nil, pos, err
			}
		}
		k := min(n-filled, r.gLeft, int64(len(r.vals)))
		for ci := range r.cols {
			if err := r.readColumn(ci, dst[ci][filled:filled+k]); err != nil {
				c.release()
				r.err = err
				return nil, pos, err
			}
		}
		filled += k
		r.gLeft -= k
	}
	r.row += n
	return c.finish(), Position{Partition: r.part.name, Offset: r.row}, nil
}

// readColumn reads exactly len(out) values of column ci.
func (r *parquetReader) readColumn(ci int, out []int64) error {
	name := Schema.Field(ci).Name
	for len(out) > 0 {
		vals := r.vals[:len(out)]
		m, err := r.cols[ci].ReadValues(vals)
		for j, v := range vals[:m] {
			if v.IsNull() {
				return fmt.Errorf("file: %s: Parquet column %q has a null value in row group %d (want no nulls)", r.part.path, name, r.g)
			}
			out[j] = v.Int64()
		}
		out = out[m:]
		if len(out) == 0 {
			return nil
		}
		if err != nil {
			if err == io.EOF {
				return fmt.Errorf("file: %s: Parquet column %q ends early in row group %d", r.part.path, name, r.g)
			}
			return fmt.Errorf("file: %s: reading Parquet column %q: %w", r.part.path, name, err)
		}
		if m == 0 {
			return fmt.Errorf("file: %s: reading Parquet column %q: no progress", r.part.path, name)
		}
	}
	return nil
}

// Lost is always 0: a file forgets nothing.
func (r *parquetReader) Lost() int64 { return 0 }

// Close releases the page readers and the file handle.
func (r *parquetReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.closeCols()
	return r.f.Close()
}
