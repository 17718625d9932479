package sink

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestResolveRowsDuplicatesConflictsAndTies(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: VersionColumn, Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	layout := Layout{Schema: schema, WriteKey: []string{"key"}}
	cols := []string{"key", "v", VersionColumn}
	rows := [][]int64{
		{1, 10, 1}, {1, 10, 1}, {1, 10, 1}, // two extra copies: 2 duplicates
		{1, 20, 2},           // newer version wins for key 1
		{2, 5, 0}, {2, 7, 0}, // same key and version, other values: a conflict
		{3, 1, 0},
	}
	for _, order := range [][]int{{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}} {
		in := make([][]int64, len(rows))
		for i, j := range order {
			in[i] = rows[j]
		}
		got, st, err := ResolveRows(layout, cols, in)
		if err != nil {
			t.Fatal(err)
		}
		if st.DuplicateRows != 2 || st.ConflictingRows != 1 || st.VisibleRows != 7 {
			t.Fatalf("order %v: stats %+v, want 2 duplicates, 1 conflict, 7 visible", order, st)
		}
		want := &Table{Columns: cols, Rows: [][]int64{{1, 20, 2}, {2, 7, 0}, {3, 1, 0}}}
		if d := got.Diff(want, 10); d != "" {
			t.Fatalf("order %v: the tie must resolve the same way whatever the file order:\n%s", order, d)
		}
	}
}
