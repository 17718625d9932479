package sink

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/rewind-engine/rewind/dataflow/parquetio"
)

// Resolve reads every visible data file at the top level of dir, Parquet or
// CSV by extension, checks that its columns are the layout's (in any
// order), and resolves the rows: for each write key the row with the
// greatest _version, with duplicates counted (see ResolveRows).
//
// A visible entry that is not a .parquet or .csv file is an error rather
// than skipped: a reader that ignores what it does not understand would
// report a clean output that another reader disagrees with.
func Resolve(dir string, layout Layout) (*Table, Stats, error) {
	sh, err := newShape(layout)
	if err != nil {
		return nil, Stats{}, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("resolving output: %w", err)
	}
	var rows [][]int64
	files := 0
	for _, e := range entries {
		name := e.Name()
		if !isVisible(name) {
			continue
		}
		path := filepath.Join(dir, name)
		if e.IsDir() {
			return nil, Stats{}, fmt.Errorf("resolving output: %s is a directory; visible entries must be data files (prefix the name with _ or . to hide it)", path)
		}
		format, ok := formatOfName(name)
		if !ok {
			return nil, Stats{}, fmt.Errorf("resolving output: %s has extension %q; visible files must be .parquet or .csv (prefix the name with _ or . to hide it)", path, filepath.Ext(name))
		}
		if format == Parquet {
			rows, err = readParquet(path, sh, rows)
		} else {
			rows, err = readCSV(path, sh, rows)
		}
		if err != nil {
			return nil, Stats{}, fmt.Errorf("resolving output: %w", err)
		}
		files++
	}
	t, st, err := ResolveRows(layout, sh.cols, rows)
	if err != nil {
		return nil, Stats{}, fmt.Errorf("resolving output %s: %w", dir, err)
	}
	st.Files = files
	return t, st, nil
}

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

// readParquet appends the rows of a Parquet file to rows. Pages are read
// column by column straight into int64 slices where parquet-go offers it.
func readParquet(path string, sh *shape, rows [][]int64) ([][]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return rows, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rows, fmt.Errorf("reading %s: %w", path, err)
	}
	pf, err := parquetio.OpenFile(f, fi.Size(), parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true))
	if err != nil {
		return rows, fmt.Errorf("reading parquet file %s: %w", path, err)
	}
	fields := pf.Schema().Fields()
	names := make([]string, len(fields))
	for i, fd := range fields {
		names[i] = fd.Name()
	}
	perm, err := matchColumns(path, names, sh)
	if err != nil {
		return rows, err
	}
	for _, fd := range fields {
		switch {
		case !fd.Leaf():
			return rows, fmt.Errorf("%s: column %q is a group, want int64", path, fd.Name())
		case fd.Repeated():
			return rows, fmt.Errorf("%s: column %q is repeated, want a plain int64", path, fd.Name())
		case !parquetio.IsInt64(fd.Type()):
			return rows, fmt.Errorf("%s: column %q is %s, want int64", path, fd.Name(), fd.Type())
		}
	}
	var generic []parquet.Value
	for g, rg := range pf.RowGroups() {
		n := rg.NumRows()
		if n == 0 {
			continue
		}
		cols := make([][]int64, len(sh.cols))
		for j, cc := range rg.ColumnChunks() {
			// n is the file's claim: memory follows what the pages hold
			// (a damaged footer must not ask for terabytes).
			grown := make([]int64, 0, min(n, fi.Size()/8+1))
			var vals []int64
			vals, generic, err = parquetio.Int64ChunkGrow(cc, n, func(k int) []int64 {
				if k > len(grown) {
					grown = append(grown, make([]int64, k-len(grown))...)
				}
				return grown
			}, generic)
			if err != nil {
				return rows, fmt.Errorf("%s: row group %d column %q: %w", path, g, names[j], err)
			}
			cols[perm[j]] = vals
		}
		rows = appendRows(rows, cols)
	}
	return rows, nil
}

// readCSV appends the rows of a CSV file with a header line to rows.
func readCSV(path string, sh *shape, rows [][]int64) ([][]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return rows, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.ReuseRecord = true
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return rows, fmt.Errorf("csv file %s is empty: it needs a header line", path)
	}
	if err != nil {
		return rows, fmt.Errorf("reading csv file %s: %w", path, err)
	}
	header = slices.Clone(header) // ReuseRecord recycles the slice on the next Read
	perm, err := matchColumns(path, header, sh)
	if err != nil {
		return rows, err
	}
	ncols := len(sh.cols)
	const chunk = 4096
	flat := make([]int64, 0, chunk*ncols)
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			// csv.ParseError names the line; FieldsPerRecord (fixed by the
			// header) catches rows with the wrong number of fields.
			return rows, fmt.Errorf("reading csv file %s: %w", path, err)
		}
		if len(flat)+ncols > cap(flat) {
			flat = make([]int64, 0, chunk*ncols)
		}
		row := flat[len(flat) : len(flat)+ncols : len(flat)+ncols]
		flat = flat[:len(flat)+ncols]
		for i, s := range rec {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				line, _ := r.FieldPos(i)
				return rows, fmt.Errorf("csv file %s line %d column %q: %w", path, line, header[i], err)
			}
			row[perm[i]] = v
		}
		rows = append(rows, row)
	}
}
