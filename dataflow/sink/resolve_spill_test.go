package sink

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// replayedFiles writes nfiles visible files of random rows to dir, Parquet
// and CSV in turn, shaped like an append sink's output after replays: few
// keys, versions that repeat, exact copies (duplicates) and rows that
// share key and version but differ (conflicts). It returns the rows in the
// order Resolve reads them (file names sort as written), after all, the
// rows of files written before.
func replayedFiles(t *testing.T, r *rand.Rand, dir, prefix string, nfiles, rowsPerFile int, all [][]int64) [][]int64 {
	t.Helper()
	sh, err := newShape(testLayout())
	must(t, err, "shape")
	for f := range nfiles {
		format := formats[f%len(formats)]
		cols := make([][]int64, len(sh.cols))
		for range rowsPerFile {
			var row []int64
			if len(all) > 0 && r.IntN(3) == 0 {
				row = slices.Clone(all[r.IntN(len(all))]) // a replayed copy
				if r.IntN(4) == 0 {
					row[3] += 1 + r.Int64N(3) // same key and version, another value
				}
			} else {
				row = []int64{r.Int64N(20) - 5, r.Int64N(3), r.Int64N(6), r.Int64N(100) - 50}
			}
			for c, v := range row {
				cols[c] = append(cols[c], v)
			}
			all = append(all, row)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s%03d.%s", prefix, f, format))
		out, err := os.Create(path)
		must(t, err, "create")
		must(t, encodeFile(format, sh, [][][]int64{cols})(out), "encode")
		must(t, out.Close(), "close")
	}
	return all
}

// TestResolveSpillsAgreeWithMemory: whatever the budget (rows sorted in
// memory, spilled as several runs, or so many runs that they are merged in
// rounds), ResolveEach gives the table and counts of ResolveRows over the
// same rows in memory, emits rows in write-key order and leaves no run
// behind.
func TestResolveSpillsAgreeWithMemory(t *testing.T) {
	r, _ := newRand(t)
	layout := testLayout()
	dir := t.TempDir()
	// Several row groups per Parquet file, and a CSV file longer than
	// the reader's chunk, so rows cross every boundary the readers have.
	defer func(old int) { parquetRowGroup = old }(parquetRowGroup)
	parquetRowGroup = 128
	rows := replayedFiles(t, r, dir, "f", 6, 300, nil)
	rows = replayedFiles(t, r, dir, "g", 1, 2*csvChunk+5, rows)
	total := int64(len(rows))
	want, wantSt := oracle(t, layout, rows)
	if wantSt.DuplicateRows == 0 || wantSt.ConflictingRows == 0 {
		t.Fatalf("the input has %d duplicates and %d conflicts; the test needs both", wantSt.DuplicateRows, wantSt.ConflictingRows)
	}
	cases := []struct {
		name      string
		budget    int64
		fanIn     int
		minSpills int
		maxSpills int
	}{
		{"in memory", 0, mergeFanIn, 0, 0},
		{"several runs", 64 * 1000, mergeFanIn, 3, 20},
		{"minimum runs, merged in rounds", 1, 4, int((total - 1) / minRunRows), int((total - 1) / minRunRows)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func(old int) { mergeFanIn = old }(mergeFanIn)
			mergeFanIn = c.fanIn
			tmp := t.TempDir()
			got := &Table{Columns: ColumnNames(layout.Schema)}
			st, err := ResolveEach(dir, layout, ResolveOptions{MemoryBudget: c.budget, TempDir: tmp}, func(row []int64) error {
				got.Rows = append(got.Rows, slices.Clone(row))
				return nil
			})
			must(t, err, "resolve")
			wantTable(t, got, want)
			if st.SpilledRuns < c.minSpills || st.SpilledRuns > c.maxSpills {
				t.Errorf("%d runs spilled, want %d..%d", st.SpilledRuns, c.minSpills, c.maxSpills)
			}
			if st.VisibleRows != wantSt.VisibleRows || st.ResolvedRows != wantSt.ResolvedRows ||
				st.DuplicateRows != wantSt.DuplicateRows || st.ConflictingRows != wantSt.ConflictingRows || st.Files != 7 || st.VisibleRows != total {
				t.Errorf("stats %+v, in memory %+v over 7 files of %d rows", st, wantSt, total)
			}
			if !slices.IsSortedFunc(got.Rows, func(a, b []int64) int { return slices.Compare(a[:2], b[:2]) }) {
				t.Errorf("resolved rows are not in write-key order")
			}
			left, err := os.ReadDir(tmp)
			must(t, err, "list temp")
			if len(left) != 0 {
				t.Errorf("resolution left %d entries in its temporary directory", len(left))
			}
		})
	}
}

// TestResolveSpillDamagedFile: a damaged file found after runs were
// spilled fails resolution with its name, and the runs are removed.
func TestResolveSpillDamagedFile(t *testing.T) {
	r, _ := newRand(t)
	layout := testLayout()
	dir := t.TempDir()
	replayedFiles(t, r, dir, "f", 4, 200, nil)
	must(t, os.WriteFile(filepath.Join(dir, "z-torn.parquet"), []byte("PAR1 torn off"), 0o644), "write")
	tmp := t.TempDir()
	_, err := ResolveEach(dir, layout, ResolveOptions{MemoryBudget: 1, TempDir: tmp}, nil)
	if err == nil || !strings.Contains(err.Error(), "z-torn.parquet") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v, want one line naming z-torn.parquet", err)
	}
	left, _ := os.ReadDir(tmp)
	if len(left) != 0 {
		t.Errorf("a failed resolution left %d entries in its temporary directory", len(left))
	}
}

// FuzzResolveSpill: rows made of fuzz bytes resolve the same in memory
// (ResolveRows) and spilled at the smallest budget.
func FuzzResolveSpill(f *testing.F) {
	f.Add([]byte{1, 1, 1, 10, 1, 1, 1, 10, 1, 1, 2, 20, 2, 2, 1, 5, 1, 1, 1, 11})
	f.Add(make([]byte, 4*100))
	layout := testLayout()
	sh, err := newShape(layout)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var rows [][]int64
		cols := make([][]int64, len(sh.cols))
		for i := 0; i+4 <= len(data); i += 4 {
			// Small value ranges, so keys and versions collide.
			row := []int64{int64(data[i] % 4), int64(data[i+1] % 2), int64(data[i+2] % 3), int64(int8(data[i+3]))}
			rows = append(rows, row)
			for c, v := range row {
				cols[c] = append(cols[c], v)
			}
		}
		if len(rows) == 0 {
			return
		}
		dir := t.TempDir()
		out, err := os.Create(filepath.Join(dir, "a.csv"))
		must(t, err, "create")
		must(t, encodeFile(CSV, sh, [][][]int64{cols})(out), "encode")
		must(t, out.Close(), "close")
		want, wantSt := oracle(t, layout, rows)
		got := &Table{Columns: ColumnNames(layout.Schema)}
		st, err := ResolveEach(dir, layout, ResolveOptions{MemoryBudget: 1, TempDir: t.TempDir()}, func(row []int64) error {
			got.Rows = append(got.Rows, slices.Clone(row))
			return nil
		})
		must(t, err, "resolve")
		wantTable(t, got, want)
		if st.DuplicateRows != wantSt.DuplicateRows || st.ConflictingRows != wantSt.ConflictingRows || st.ResolvedRows != wantSt.ResolvedRows {
			t.Fatalf("spilled stats %+v, in memory %+v", st, wantSt)
		}
	})
}
