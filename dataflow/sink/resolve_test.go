package sink

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// TestResolveHidden: names starting with _ or . are not part of the output,
// whatever they contain.
func TestResolveHidden(t *testing.T) {
	layout := testLayout()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version,value\n1,2,3,4\n1,2,5,6\n"), 0o644), "write")
	for _, name := range []string{"_x", ".x", "_y.csv", ".tmp-part.parquet", "_junk.parquet"} {
		must(t, os.WriteFile(filepath.Join(dir, name), []byte("not data at all"), 0o644), "write")
	}
	must(t, os.Mkdir(filepath.Join(dir, "_staging"), 0o755), "mkdir")
	got, st := resolve(t, dir, layout)
	want := &Table{Columns: ColumnNames(layout.Schema), Rows: [][]int64{{1, 2, 5, 6}}}
	wantTable(t, got, want)
	if st.Files != 1 || st.VisibleRows != 2 {
		t.Errorf("stats %+v, want 1 file with 2 rows", st)
	}
}

// TestResolveCSVColumnOrder: a CSV with the layout's columns in another
// order reads correctly; the table is in layout order.
func TestResolveCSVColumnOrder(t *testing.T) {
	layout := testLayout()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("value,_version,k2,k1\n4,3,2,1\n"), 0o644), "write")
	got, _ := resolve(t, dir, layout)
	wantTable(t, got, &Table{Columns: ColumnNames(layout.Schema), Rows: [][]int64{{1, 2, 3, 4}}})
}

// TestResolveDuplicates: the duplicate count across files and formats.
func TestResolveDuplicates(t *testing.T) {
	layout := testLayout()
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version,value\n1,1,1,10\n1,1,1,10\n1,1,2,20\n"), 0o644), "write")
	must(t, os.WriteFile(filepath.Join(dir, "b.csv"), []byte("k1,k2,_version,value\n1,1,1,10\n2,2,1,5\n"), 0o644), "write")
	got, st := resolve(t, dir, layout)
	wantTable(t, got, &Table{Columns: ColumnNames(layout.Schema), Rows: [][]int64{{1, 1, 2, 20}, {2, 2, 1, 5}}})
	if st.DuplicateRows != 2 || st.VisibleRows != 5 || st.Files != 2 {
		t.Errorf("stats %+v, want 2 duplicates (three copies of (1,1,v1)), 5 rows, 2 files", st)
	}
}

func TestResolveErrors(t *testing.T) {
	layout := testLayout()
	mem := newMem(t)
	cases := []struct {
		name  string
		setup func(dir string)
		want  []string // substrings of the error
	}{
		{"unknown extension", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644), "write")
		}, []string{"notes.txt", ".txt"}},
		{"visible directory", func(dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755), "mkdir")
		}, []string{"sub", "directory"}},
		{"csv missing column", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version\n1,2,3\n"), 0o644), "write")
		}, []string{"a.csv", "columns", "value"}},
		{"csv extra column", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version,value,x\n1,2,3,4,5\n"), 0o644), "write")
		}, []string{"a.csv", "columns"}},
		{"csv not an integer", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version,value\n1,2,3,4\n1,2,x,4\n"), 0o644), "write")
		}, []string{"a.csv", "line 3", "_version"}},
		{"csv short row", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.csv"), []byte("k1,k2,_version,value\n1,2,3\n"), 0o644), "write")
		}, []string{"a.csv"}},
		{"csv empty", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.csv"), nil, 0o644), "write")
		}, []string{"a.csv", "header"}},
		{"parquet of another layout", func(dir string) {
			other := Layout{Schema: arrow.NewSchema([]arrow.Field{
				{Name: "k1", Type: arrow.PrimitiveTypes.Int64}, {Name: VersionColumn, Type: arrow.PrimitiveTypes.Int64},
			}, nil), WriteKey: []string{"k1"}}
			s := openSink(t, dir, Append, Parquet, other, mem)
			defer s.Close()
			w, err := s.Writer(0, 0)
			must(t, err, "writer")
			write(t, mem, w, other, 0, [][]int64{{1, 1}})
			must(t, w.Flush(0), "flush")
			must(t, w.Close(), "close")
		}, []string{"part-s0-a0-000000.parquet", "columns", "[k1 _version]"}},
		{"parquet garbage", func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "a.parquet"), []byte("PAR1 but not really"), 0o644), "write")
		}, []string{"a.parquet"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(dir)
			_, _, err := Resolve(dir, layout)
			if err == nil {
				t.Fatalf("Resolve succeeded")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, _, err := Resolve(filepath.Join(t.TempDir(), "missing"), layout); err == nil {
		t.Errorf("Resolve of a missing directory succeeded")
	}
}

// writeArrowParquet writes rows with arrow-go (nullable columns, dictionary
// encoding, small row groups: what another tool would produce) in the given
// column order. nullAt >= 0 puts a null in the first column at that row.
func writeArrowParquet(t *testing.T, path string, layout Layout, rows [][]int64, perm []int, nullAt int) {
	t.Helper()
	mem := newMem(t)
	fields := make([]arrow.Field, len(perm))
	cols := make([]arrow.Array, len(perm))
	for j, src := range perm {
		fields[j] = arrow.Field{Name: layout.Schema.Field(src).Name, Type: arrow.PrimitiveTypes.Int64, Nullable: true}
		b := array.NewInt64Builder(mem)
		for i, row := range rows {
			if j == 0 && i == nullAt {
				b.AppendNull()
			} else {
				b.Append(row[src])
			}
		}
		cols[j] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
	defer rec.Release()
	for _, c := range cols {
		c.Release()
	}
	f, err := os.Create(path)
	must(t, err, "create")
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithDictionaryDefault(true), parquet.WithMaxRowGroupLength(64))
	w, err := pqarrow.NewFileWriter(rec.Schema(), f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem)))
	must(t, err, "pqarrow writer")
	must(t, w.Write(rec), "pqarrow write")
	must(t, w.Close(), "pqarrow close")
}

// TestResolveForeignParquet: Resolve reads Parquet written by another
// library (dictionary pages, optional columns without nulls, another
// column order, several row groups), and rejects a null.
func TestResolveForeignParquet(t *testing.T) {
	r, _ := newRand(t)
	layout := testLayout()
	g := newGen(r, 20, 500)
	rows := g.rows(300)
	dir := t.TempDir()
	writeArrowParquet(t, filepath.Join(dir, "foreign.parquet"), layout, rows, []int{3, 1, 0, 2}, -1)
	got, st := resolve(t, dir, layout)
	want, _ := oracle(t, layout, rows)
	wantTable(t, got, want)
	if st.VisibleRows != int64(len(rows)) {
		t.Errorf("read %d rows, want %d", st.VisibleRows, len(rows))
	}

	dir = t.TempDir()
	writeArrowParquet(t, filepath.Join(dir, "nulls.parquet"), layout, rows, []int{3, 1, 0, 2}, 100)
	if _, _, err := Resolve(dir, layout); err == nil || !strings.Contains(err.Error(), "null") || !strings.Contains(err.Error(), "nulls.parquet") {
		t.Errorf("file with a null: %v", err)
	}
}
