// Package parquetio reads Parquet int64 columns into int64 slices, the
// one read path the engine's Parquet readers share (the disk-phase tables,
// the sink's resolver, the file source).
package parquetio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// OpenFile is parquet.OpenFile, with a panic of parquet-go on damaged
// metadata (it indexes slices with lengths it read) returned as an error,
// and the footer length checked first: parquet-go allocates whatever the
// last 8 bytes claim (up to 4 GiB, "PAR1PAR1" asks for 827 MB) before
// reading it. Every page header is then vetted (see vetPages), since
// parquet-go allocates the size a page header claims before reading it.
func OpenFile(r io.ReaderAt, size int64, opts ...parquet.FileOption) (f *parquet.File, err error) {
	defer Recover(&err)
	var tail [8]byte
	if size < 12 {
		return nil, fmt.Errorf("not a Parquet file: %d bytes", size)
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("reading the Parquet footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("not a Parquet file: it does not end in PAR1")
	}
	if footer := int64(binary.LittleEndian.Uint32(tail[:4])); footer > size-12 {
		return nil, fmt.Errorf("not a Parquet file: footer of %d bytes in a %d-byte file", footer, size)
	}
	if f, err = parquet.OpenFile(r, size, opts...); err != nil {
		return nil, err
	}
	if err := vetPages(r, size, f.Metadata(), f.OffsetIndexes()); err != nil {
		return nil, err
	}
	return f, nil
}

// Recover, deferred directly, turns a panic of parquet-go while reading a
// damaged file into *err. parquet-go trusts offsets and lengths in the
// file; a reader of durable or user files must fail, not crash.
func Recover(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("damaged Parquet data: %v", r)
	}
}

// Int64Chunk reads a column chunk of exactly len(out) int64 values into
// out. Pages that offer parquet.Int64Reader (PLAIN pages) are read straight
// into out; others (dictionary pages of other writers' files) go through
// generic values, for which scratch is reused and returned so a caller
// reading many chunks allocates it once. A null value, or a count other
// than len(out), is an error.
func Int64Chunk(cc parquet.ColumnChunk, out []int64, scratch []parquet.Value) ([]parquet.Value, error) {
	_, scratch, err := Int64ChunkGrow(cc, int64(len(out)), func(int) []int64 { return out }, scratch)
	return scratch, err
}

// maxEmptyPages bounds the pages without values Int64ChunkGrow reads in
// one column chunk.
const maxEmptyPages = 1024

// Int64ChunkGrow reads a column chunk of exactly n int64 values without
// sizing memory by n, which is the file's claim: a damaged row count must
// not make the reader allocate terabytes. Before each page it calls
// grow(k), which returns a slice of at least k values holding the values
// read so far, where k counts the values the pages read actually hold. It
// returns the last slice grow returned, cut to n.
func Int64ChunkGrow(cc parquet.ColumnChunk, n int64, grow func(k int) []int64, scratch []parquet.Value) (out []int64, _ []parquet.Value, err error) {
	defer Recover(&err)
	pages := cc.Pages()
	defer pages.Close()
	got, empty := 0, 0
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, scratch, err
		}
		if p.NumValues() == 0 {
			// A damaged page header can hand back the same empty page
			// forever; no writer needs this many in one chunk.
			if empty++; empty > maxEmptyPages {
				parquet.Release(p)
				return out, scratch, fmt.Errorf("more than %d empty pages in a column chunk", maxEmptyPages)
			}
		}
		if p.NumNulls() > 0 {
			parquet.Release(p)
			return out, scratch, fmt.Errorf("%d null values in a required int64 column", p.NumNulls())
		}
		k := int(p.NumValues())
		if int64(got+k) > n || k < 0 {
			parquet.Release(p)
			return out, scratch, fmt.Errorf("more values than the row group's %d rows", n)
		}
		if out = grow(got + k); len(out) < got+k {
			parquet.Release(p)
			return out, scratch, fmt.Errorf("more values than the row group's %d rows", len(out))
		}
		scratch, err = int64Page(p, out[got:got+k], scratch)
		parquet.Release(p)
		if err != nil {
			return out, scratch, err
		}
		got += k
	}
	if int64(got) != n {
		return out, scratch, fmt.Errorf("%d values for %d rows", got, n)
	}
	return out[:got], scratch, nil
}

// int64Page reads exactly len(out) int64 values of page p.
func int64Page(p parquet.Page, out []int64, scratch []parquet.Value) ([]parquet.Value, error) {
	vr := p.Values()
	got := 0
	if ir, ok := vr.(parquet.Int64Reader); ok {
		for got < len(out) {
			k, err := ir.ReadInt64s(out[got:])
			got += k
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return scratch, err
			}
			if k == 0 {
				return scratch, io.ErrNoProgress
			}
		}
	} else {
		if scratch == nil {
			scratch = make([]parquet.Value, 1024)
		}
		for got < len(out) {
			k, err := vr.ReadValues(scratch[:min(len(scratch), len(out)-got)])
			for _, v := range scratch[:k] {
				if v.IsNull() {
					return scratch, errors.New("null value in a required int64 column")
				}
				out[got] = v.Int64()
				got++
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return scratch, err
			}
			if k == 0 {
				return scratch, io.ErrNoProgress
			}
		}
	}
	if got != len(out) {
		return scratch, fmt.Errorf("page yielded %d of %d values", got, len(out))
	}
	return scratch, nil
}

// Kind is t's physical kind; ok is false for types that have none.
// parquet-go's logical types for groups (LIST, MAP) panic when asked for
// their kind, and a damaged or foreign file can attach them to a leaf.
func Kind(t parquet.Type) (k parquet.Kind, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return t.Kind(), true
}

// IsInt64 reports whether t is stored as INT64.
func IsInt64(t parquet.Type) bool {
	k, ok := Kind(t)
	return ok && k == parquet.Int64
}
