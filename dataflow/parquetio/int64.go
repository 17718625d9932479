// Package parquetio reads Parquet int64 columns into int64 slices, the
// one read path the engine's Parquet readers share (the disk-phase tables
// and the sink's resolver).
package parquetio

import (
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Int64Chunk reads a column chunk of exactly len(out) int64 values into
// out. Pages that offer parquet.Int64Reader (PLAIN pages) are read straight
// into out; others (dictionary pages of other writers' files) go through
// generic values, for which scratch is reused and returned so a caller
// reading many chunks allocates it once. A null value, or a count other
// than len(out), is an error.
func Int64Chunk(cc parquet.ColumnChunk, out []int64, scratch []parquet.Value) ([]parquet.Value, error) {
	pages := cc.Pages()
	defer pages.Close()
	got := 0
	for {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return scratch, err
		}
		if p.NumNulls() > 0 {
			parquet.Release(p)
			return scratch, fmt.Errorf("%d null values in a required int64 column", p.NumNulls())
		}
		k := int(p.NumValues())
		if got+k > len(out) {
			parquet.Release(p)
			return scratch, fmt.Errorf("more values than the row group's %d rows", len(out))
		}
		scratch, err = int64Page(p, out[got:got+k], scratch)
		parquet.Release(p)
		if err != nil {
			return scratch, err
		}
		got += k
	}
	if got != len(out) {
		return scratch, fmt.Errorf("%d values for %d rows", got, len(out))
	}
	return scratch, nil
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
