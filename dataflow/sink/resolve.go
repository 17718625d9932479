package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// ResolveOptions bound what resolution holds in memory.
type ResolveOptions struct {
	// MemoryBudget is about the bytes of rows resolution buffers before it
	// sorts them and spills them to disk as a run (0 =
	// DefaultResolveBudget). On top of it, resolution holds one Parquet row
	// group at a time (at most parquetRowGroup rows in the sink's files)
	// and a 64 KiB buffer per run it merges.
	MemoryBudget int64
	// TempDir is where the runs go ("" = the system's temporary directory).
	// They are removed before resolution returns.
	TempDir string
}

// Resolve reads every visible data file at the top level of dir, Parquet or
// CSV by extension, and the tails of append writers' in-progress files
// whose rows are not in a visible file yet (tail.go), checks that its columns are the layout's (in any
// order), and resolves the rows: for each write key the row with the
// greatest _version, with duplicates counted as ResolveRows counts them.
// The resolved table is held in memory: it is for tests and small outputs.
// ResolveEach computes the same in bounded memory.
func Resolve(dir string, layout Layout) (*Table, Stats, error) {
	t := &Table{Columns: ColumnNames(layout.Schema)}
	st, err := ResolveEach(dir, layout, ResolveOptions{}, func(row []int64) error {
		t.Rows = append(t.Rows, slices.Clone(row))
		return nil
	})
	if err != nil {
		return nil, Stats{}, err
	}
	return t, st, nil
}

// ResolveEach resolves dir as Resolve does, without holding the output in
// memory: it sorts the visible rows by write key, _version and the order
// they were read in, spilling sorted runs to disk under opt's budget, and
// merges the runs in one pass that counts and resolves. emit, when not
// nil, receives every resolved row in write-key order, its columns in
// layout order; the slice is reused once emit returns.
//
// A visible entry that is not a .parquet or .csv file is an error rather
// than skipped: a reader that ignores what it does not understand would
// report a clean output that another reader disagrees with.
func ResolveEach(dir string, layout Layout, opt ResolveOptions, emit func(row []int64) error) (Stats, error) {
	sh, err := newShape(layout)
	if err != nil {
		return Stats{}, fmt.Errorf("resolving output %s: %w", dir, err)
	}
	entries, err := listOutput(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("resolving output: %w", err)
	}
	srt := newSorter(sh, opt.MemoryBudget, opt.TempDir)
	defer srt.cleanup()
	srt.expected = rowsBound(entries, len(sh.cols))
	var st Stats
	for _, e := range entries {
		if err := readEntry(dir, e, sh, srt.add); err != nil {
			return Stats{}, fmt.Errorf("resolving output: %w", err)
		}
		st.Files++
	}
	g := newGrouper(sh, emit)
	if err := srt.each(g.add); err != nil {
		return Stats{}, fmt.Errorf("resolving output %s: %w", dir, err)
	}
	if err := g.end(); err != nil {
		return Stats{}, err
	}
	st.VisibleRows, st.ResolvedRows = g.visible, g.resolved
	st.DuplicateRows, st.ConflictingRows = g.dups, g.conflicts
	st.SpilledRuns = srt.spills
	return st, nil
}

// grouper reads rows sorted by write key, _version and arrival, and counts
// and resolves them as ResolveRows does: within one key and version the
// first row read is the original, a later equal row a duplicate and a
// later different row a conflict; the key's resolved row is its greatest
// by (_version, columns in layout order).
type grouper struct {
	sh                                 *shape
	ncols                              int
	emit                               func([]int64) error
	first                              []int64 // the first row read of the current key and version
	best                               []int64 // the current key's greatest row so far
	have                               bool
	visible, resolved, dups, conflicts int64
}

func newGrouper(sh *shape, emit func([]int64) error) *grouper {
	n := len(sh.cols)
	return &grouper{sh: sh, ncols: n, emit: emit, first: make([]int64, n), best: make([]int64, n)}
}

func (g *grouper) sameKey(a, b []int64) bool {
	for _, i := range g.sh.keyIdx {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// add takes the next row in order; its last value, the arrival, is ignored.
func (g *grouper) add(withSeq []int64) error {
	r := withSeq[:g.ncols]
	ver := g.sh.verIdx
	g.visible++
	if !g.have || !g.sameKey(r, g.best) {
		if err := g.end(); err != nil {
			return err
		}
		copy(g.first, r)
		copy(g.best, r)
		g.have = true
		g.resolved++
		return nil
	}
	switch {
	case r[ver] != g.first[ver]:
		copy(g.first, r)
	case slices.Equal(r, g.first):
		g.dups++
	default:
		g.conflicts++
	}
	if r[ver] > g.best[ver] || (r[ver] == g.best[ver] && slices.Compare(r, g.best) > 0) {
		copy(g.best, r)
	}
	return nil
}

// end emits the current key's resolved row, if there is one.
func (g *grouper) end() error {
	if !g.have || g.emit == nil {
		return nil
	}
	g.have = false
	return g.emit(g.best)
}

// readEntry hands the rows of one entry of listOutput to each.
func readEntry(dir string, e outputEntry, sh *shape, each chunkFunc) error {
	if e.tail {
		ok, err := eachTailFile(e.path, len(sh.cols), each)
		if err != nil || ok {
			return err
		}
		// Removed since the listing: its rows are in its visible file,
		// which the listing did not see.
		vis := filepath.Join(dir, e.name)
		if _, err := os.Stat(vis); err != nil {
			return fmt.Errorf("tail %s is gone and no visible file %s holds its rows: %w", e.path, vis, err)
		}
		e = outputEntry{name: e.name, path: vis}
	}
	if fi, err := os.Stat(e.path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory; visible entries must be data files (prefix the name with _ or . to hide it)", e.path)
	}
	format, ok := formatOfName(e.name)
	if !ok {
		return fmt.Errorf("%s has extension %q; visible files must be .parquet or .csv (prefix the name with _ or . to hide it)", e.path, filepath.Ext(e.name))
	}
	if format == Parquet {
		return eachParquet(e.path, sh, each)
	}
	return eachCSV(e.path, sh, each)
}

// rowsBound bounds the rows the entries can hold, from their sizes: a
// sink's Parquet or tail value takes 8 bytes (PLAIN), a CSV one at least 2
// (a digit and a separator). A foreign compressed Parquet file can hold
// more; the bound only sizes a first allocation.
func rowsBound(entries []outputEntry, ncols int) int64 {
	var rows int64
	for _, e := range entries {
		per := int64(8 * ncols)
		if f, _ := formatOfName(e.name); f == CSV && !e.tail {
			per = int64(2 * ncols)
		}
		rows += e.size / per
	}
	return rows
}
