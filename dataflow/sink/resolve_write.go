package sink

import (
	"fmt"
	"io"
)

// resolvedChunk is how many resolved rows are encoded at once.
const resolvedChunk = 4096

// WriteResolved resolves dir as ResolveEach does and writes the resolved
// rows, in write-key order, to w as one data file of format with the
// layout's columns. What it holds is ResolveEach's budget plus the
// encoder's buffer (one Parquet row group at most).
func WriteResolved(dir string, layout Layout, opt ResolveOptions, format Format, w io.Writer) (Stats, error) {
	sh, err := newShape(layout)
	if err != nil {
		return Stats{}, err
	}
	enc, err := newEncoder(format, w, sh)
	if err != nil {
		return Stats{}, err
	}
	cols := make([][]int64, len(sh.cols))
	for c := range cols {
		cols[c] = make([]int64, 0, resolvedChunk)
	}
	flush := func() error {
		if len(cols[0]) == 0 {
			return nil
		}
		err := enc.write(cols)
		for c := range cols {
			cols[c] = cols[c][:0]
		}
		return err
	}
	st, err := ResolveEach(dir, layout, opt, func(row []int64) error {
		for c, v := range row {
			cols[c] = append(cols[c], v)
		}
		if len(cols[0]) == resolvedChunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return Stats{}, err
	}
	if err := flush(); err != nil {
		return Stats{}, fmt.Errorf("writing resolved rows: %w", err)
	}
	if err := enc.close(); err != nil {
		return Stats{}, fmt.Errorf("writing resolved rows: %w", err)
	}
	return st, nil
}
