package sink

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Table is a set of output rows with int64 columns, in a canonical order:
// sorted by the write key, then by _version, then by the remaining columns.
// It is what tests compare: a resolved directory against the oracle.
type Table struct {
	Columns []string
	Rows    [][]int64
}

// Stats describes a directory as Resolve found it.
type Stats struct {
	Files       int   // visible data files read
	VisibleRows int64 // rows in visible files
	// ResolvedRows counts the write keys: the rows left after resolving.
	ResolvedRows int64
	// DuplicateRows counts the extra copies: a visible row equal to another
	// visible row (same write key, same _version, same values) counts once
	// for every copy beyond the first.
	DuplicateRows int64
	// ConflictingRows counts visible rows that share write key and _version
	// with another visible row but differ in some other column. An append
	// sink shows them after a replay that merged its inputs in another order
	// (an intermediate version of a key computed over other records);
	// resolution keeps the greatest row so the outcome does not depend on
	// file order, and the summary reports them.
	ConflictingRows int64
	// SpilledRuns counts the sorted runs resolution wrote to disk because
	// the rows did not fit its memory budget (0: sorted in memory).
	SpilledRuns int
}

// ResolveRows keeps, for each write key, the row with the greatest _version
// and counts duplicates. rows are laid out as cols; the input is not kept.
func ResolveRows(layout Layout, cols []string, rows [][]int64) (*Table, Stats, error) {
	keyIdx := make([]int, len(layout.WriteKey))
	for i, k := range layout.WriteKey {
		keyIdx[i] = slices.Index(cols, k)
		if keyIdx[i] < 0 {
			return nil, Stats{}, fmt.Errorf("output has no write-key column %q (columns %v)", k, cols)
		}
	}
	ver := slices.Index(cols, VersionColumn)
	if ver < 0 {
		return nil, Stats{}, fmt.Errorf("output has no %s column (columns %v)", VersionColumn, cols)
	}
	// Keys are the write-key values as fixed-width bytes: cheap to build and
	// unambiguous, unlike formatted text.
	type rk struct {
		key string
		ver int64
	}
	var st Stats
	st.VisibleRows = int64(len(rows))
	seen := make(map[rk][]int64, len(rows))
	best := make(map[string][]int64, len(rows))
	kb := make([]byte, 8*len(keyIdx))
	for _, r := range rows {
		for j, i := range keyIdx {
			binary.LittleEndian.PutUint64(kb[8*j:], uint64(r[i]))
		}
		k := string(kb)
		if first, dup := seen[rk{k, r[ver]}]; !dup {
			seen[rk{k, r[ver]}] = r
		} else if slices.Equal(first, r) {
			st.DuplicateRows++
		} else {
			st.ConflictingRows++
		}
		if cur, ok := best[k]; !ok || r[ver] > cur[ver] || (r[ver] == cur[ver] && slices.Compare(r, cur) > 0) {
			best[k] = r
		}
	}
	t := &Table{Columns: slices.Clone(cols)}
	for _, r := range best {
		t.Rows = append(t.Rows, r)
	}
	t.sort(keyIdx, ver)
	st.ResolvedRows = int64(len(t.Rows))
	return t, st, nil
}

func (t *Table) sort(keyIdx []int, ver int) {
	slices.SortFunc(t.Rows, func(a, b []int64) int {
		for _, i := range keyIdx {
			if a[i] != b[i] {
				return cmpInt(a[i], b[i])
			}
		}
		if a[ver] != b[ver] {
			return cmpInt(a[ver], b[ver])
		}
		return slices.Compare(a, b)
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// RowsOf appends the rows of an all-int64 batch to rows, in the column order
// of cols (which must all exist in the batch).
func RowsOf(batch arrow.RecordBatch, cols []string, rows [][]int64) ([][]int64, error) {
	arrs := make([]*array.Int64, len(cols))
	for i, c := range cols {
		idx := batch.Schema().FieldIndices(c)
		if len(idx) == 0 {
			return rows, fmt.Errorf("batch has no column %q", c)
		}
		a, ok := batch.Column(idx[0]).(*array.Int64)
		if !ok {
			return rows, fmt.Errorf("column %q is %s, want int64", c, batch.Column(idx[0]).DataType())
		}
		arrs[i] = a
	}
	for r := 0; r < int(batch.NumRows()); r++ {
		row := make([]int64, len(cols))
		for i, a := range arrs {
			row[i] = a.Value(r)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// ColumnNames returns the field names of s.
func ColumnNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i := range out {
		out[i] = s.Field(i).Name
	}
	return out
}

// Diff describes up to max differences between t (got) and want, or returns
// "" when they hold the same rows. Tables must have the same columns.
func (t *Table) Diff(want *Table, max int) string {
	if !slices.Equal(t.Columns, want.Columns) {
		return fmt.Sprintf("columns differ: got %v, want %v", t.Columns, want.Columns)
	}
	got, exp := slices.Clone(t.Rows), slices.Clone(want.Rows)
	slices.SortFunc(got, slices.Compare)
	slices.SortFunc(exp, slices.Compare)
	var b strings.Builder
	n := 0
	i, j := 0, 0
	for (i < len(t.Rows) || j < len(want.Rows)) && n < max {
		switch {
		case j >= len(exp) || (i < len(got) && slices.Compare(got[i], exp[j]) < 0):
			fmt.Fprintf(&b, "  unexpected row %v\n", got[i])
			i++
			n++
		case i >= len(got) || slices.Compare(got[i], exp[j]) > 0:
			fmt.Fprintf(&b, "  missing row    %v\n", exp[j])
			j++
			n++
		default:
			i++
			j++
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return fmt.Sprintf("columns %v; got %d rows, want %d:\n%s", t.Columns, len(t.Rows), len(want.Rows), b.String())
}
