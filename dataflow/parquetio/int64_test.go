package parquetio

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type plainRow struct {
	A int64 `parquet:"a"`
	B int64 `parquet:"b,dict"`
}

type optionalRow struct {
	A *int64 `parquet:"a,optional"`
}

func openFile(t *testing.T, data []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Plain pages (read as int64s) and dictionary pages (read as values, over
// several pages so scratch is reused) both give back what was written.
func TestInt64ChunkPlainAndDictionary(t *testing.T) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[plainRow](&buf, parquet.PageBufferSize(1024))
	rows := make([]plainRow, 5000)
	for i := range rows {
		rows[i] = plainRow{A: int64(i*i - 7), B: int64(i % 13)}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f := openFile(t, buf.Bytes())
	var scratch []parquet.Value
	var got [2][]int64
	for _, rg := range f.RowGroups() {
		for c, cc := range rg.ColumnChunks() {
			out := make([]int64, rg.NumRows())
			var err error
			if scratch, err = Int64Chunk(cc, out, scratch); err != nil {
				t.Fatalf("column %d: %v", c, err)
			}
			got[c] = append(got[c], out...)
		}
	}
	for i, r := range rows {
		if got[0][i] != r.A || got[1][i] != r.B {
			t.Fatalf("row %d: got (%d, %d), want (%d, %d)", i, got[0][i], got[1][i], r.A, r.B)
		}
	}
	if scratch == nil {
		t.Fatal("the dictionary column was not read through generic values")
	}
}

func TestInt64ChunkRejectsNullsAndWrongCounts(t *testing.T) {
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[optionalRow](&buf)
	one := int64(1)
	if _, err := w.Write([]optionalRow{{A: &one}, {A: nil}, {A: &one}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cc := openFile(t, buf.Bytes()).RowGroups()[0].ColumnChunks()[0]
	if _, err := Int64Chunk(cc, make([]int64, 3), nil); err == nil || !strings.Contains(err.Error(), "null") {
		t.Fatalf("a null was accepted: err %v", err)
	}

	buf.Reset()
	pw := parquet.NewGenericWriter[plainRow](&buf)
	if _, err := pw.Write([]plainRow{{1, 2}, {3, 4}}); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	cc = openFile(t, buf.Bytes()).RowGroups()[0].ColumnChunks()[0]
	if _, err := Int64Chunk(cc, make([]int64, 3), nil); err == nil {
		t.Fatal("2 values were accepted for 3 rows")
	}
	if _, err := Int64Chunk(cc, make([]int64, 1), nil); err == nil {
		t.Fatal("2 values were accepted for 1 row")
	}
}
