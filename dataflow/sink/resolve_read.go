package sink

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/rewind-engine/rewind/dataflow/parquetio"
)

// chunkFunc receives rows column-wise, in layout order, all columns of
// equal length. The slices are the reader's: they are reused once it
// returns.
type chunkFunc func(cols [][]int64) error

// matchColumns maps a file's columns to the layout's: perm[i] is the layout
// position of file column i. The sets must be equal.
func matchColumns(path string, names []string, sh *shape) ([]int, error) {
	mismatch := func() error {
		return fmt.Errorf("%s has columns %v, want %v (in any order)", path, names, sh.cols)
	}
	if len(names) != len(sh.cols) {
		return nil, mismatch()
	}
	perm := make([]int, len(names))
	seen := make([]bool, len(sh.cols))
	for i, n := range names {
		j := slices.Index(sh.cols, n)
		if j < 0 || seen[j] {
			return nil, mismatch()
		}
		seen[j] = true
		perm[i] = j
	}
	return perm, nil
}

// eachParquet hands the rows of a Parquet file to each, a row group at a
// time: what it holds at once is one row group's columns (the sink writes
// at most parquetRowGroup rows to one). Pages are read column by column
// straight into int64 slices where parquet-go offers it.
func eachParquet(path string, sh *shape, each chunkFunc) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	pf, err := parquetio.OpenFile(f, fi.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return fmt.Errorf("reading parquet file %s: %w", path, err)
	}
	fields := pf.Schema().Fields()
	names := make([]string, len(fields))
	for i, fd := range fields {
		names[i] = fd.Name()
	}
	perm, err := matchColumns(path, names, sh)
	if err != nil {
		return err
	}
	for _, fd := range fields {
		switch {
		case !fd.Leaf():
			return fmt.Errorf("%s: column %q is a group, want int64", path, fd.Name())
		case fd.Repeated():
			return fmt.Errorf("%s: column %q is repeated, want a plain int64", path, fd.Name())
		case !parquetio.IsInt64(fd.Type()):
			return fmt.Errorf("%s: column %q is %s, want int64", path, fd.Name(), fd.Type())
		}
	}
	var generic []parquet.Value
	// One buffer per column, reused across row groups.
	bufs := make([][]int64, len(sh.cols))
	cols := make([][]int64, len(sh.cols))
	for g, rg := range pf.RowGroups() {
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		for j, cc := range rg.ColumnChunks() {
			p := perm[j]
			// n is the file's claim: memory follows what the pages hold
			// (a damaged footer must not ask for terabytes).
			grown := bufs[p][:0]
			if cap(grown) == 0 {
				grown = make([]int64, 0, min(n, fi.Size()/8+1))
			}
			var vals []int64
			vals, generic, err = parquetio.Int64ChunkGrow(cc, n, func(k int) []int64 {
				if k > len(grown) {
					grown = append(grown, make([]int64, k-len(grown))...)
				}
				return grown
			}, generic)
			if err != nil {
				return fmt.Errorf("%s: row group %d column %q: %w", path, g, names[j], err)
			}
			bufs[p] = grown
			cols[p] = vals
		}
		if err := each(cols); err != nil {
			return err
		}
	}
	return nil
}

// readParquet appends the rows of a Parquet file to rows, for readers
// that want them all (a transactional sink reading back what it published).
func readParquet(path string, sh *shape, rows [][]int64) ([][]int64, error) {
	err := eachParquet(path, sh, func(cols [][]int64) error { rows = appendRows(rows, cols); return nil })
	return rows, err
}

// readCSV appends the rows of a CSV file to rows.
func readCSV(path string, sh *shape, rows [][]int64) ([][]int64, error) {
	err := eachCSV(path, sh, func(cols [][]int64) error { rows = appendRows(rows, cols); return nil })
	return rows, err
}

// appendRows transposes column-wise values (in layout order) into rows.
func appendRows(rows [][]int64, cols [][]int64) [][]int64 {
	n := len(cols[0])
	// One backing array for the chunk: a slice per row would be n allocations.
	flat := make([]int64, n*len(cols))
	for r := 0; r < n; r++ {
		row := flat[r*len(cols) : (r+1)*len(cols) : (r+1)*len(cols)]
		for c, col := range cols {
			row[c] = col[r]
		}
		rows = append(rows, row)
	}
	return rows
}

// csvChunk is how many CSV rows are handed over at once.
const csvChunk = 4096

// eachCSV hands the rows of a CSV file with a header line to each, csvChunk
// rows at a time.
func eachCSV(path string, sh *shape, each chunkFunc) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("csv file %s is empty: it needs a header line", path)
	}
	if err != nil {
		return fmt.Errorf("reading csv file %s: %w", path, err)
	}
	header = slices.Clone(header) // ReuseRecord recycles the slice on the next Read
	perm, err := matchColumns(path, header, sh)
	if err != nil {
		return err
	}
	cols := make([][]int64, len(sh.cols))
	for c := range cols {
		cols[c] = make([]int64, 0, csvChunk)
	}
	flush := func() error {
		if len(cols[0]) == 0 {
			return nil
		}
		err := each(cols)
		for c := range cols {
			cols[c] = cols[c][:0]
		}
		return err
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return flush()
		}
		if err != nil {
			// csv.ParseError names the line; FieldsPerRecord (fixed by the
			// header) catches rows with the wrong number of fields.
			return fmt.Errorf("reading csv file %s: %w", path, err)
		}
		for i, s := range rec {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				line, _ := r.FieldPos(i)
				return fmt.Errorf("csv file %s line %d column %q: %w", path, line, header[i], err)
			}
			cols[perm[i]] = append(cols[perm[i]], v)
		}
		if len(cols[0]) == csvChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}
