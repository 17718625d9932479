package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	pqfile "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/parquet-go/parquet-go"
)

// randRows makes n rows with ids from first and arbitrary int64 fields,
// including negatives and extremes, so parsing is exercised at the edges.
func randRows(rng *rand.Rand, first int64, n int) []row {
	out := make([]row, n)
	for i := range out {
		out[i] = row{first + int64(i), rng.Int64N(1000), rng.Int64N(200) - 100, rng.Int64() - 1<<62}
	}
	if n > 2 {
		out[1][3] = -1 << 63
		out[2][3] = 1<<63 - 1
	}
	return out
}

// writeCSV writes rows under the required header. blank inserts an empty
// line before every blank-th row, crlf uses Windows line ends.
func writeCSV(t *testing.T, path string, rows []row, blank int, crlf bool) {
	t.Helper()
	eol := "\n"
	if crlf {
		eol = "\r\n"
	}
	var b bytes.Buffer
	b.WriteString(csvHeader + eol)
	for i, r := range rows {
		if blank > 0 && i%blank == blank-1 {
			b.WriteString(eol)
		}
		fmt.Fprintf(&b, "%d,%d,%d,%d%s", r[0], r[1], r[2], r[3], eol)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type pqRow struct {
	ID    int64  `parquet:"id"`
	Key   int64  `parquet:"key"`
	Value int64  `parquet:"value"`
	TS    int64  `parquet:"ts"`
	Extra string `parquet:"extra"` // extra columns are ignored
}

// writeParquetGo writes rows with parquet-go in several row groups and
// small pages, so seeking crosses both.
func writeParquetGo(t *testing.T, path string, rows []row, perGroup int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](f, parquet.MaxRowsPerRowGroup(perGroup), parquet.PageBufferSize(2048))
	batch := make([]pqRow, len(rows))
	for i, r := range rows {
		batch[i] = pqRow{r[0], r[1], r[2], r[3], "x"}
	}
	if _, err := w.Write(batch); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeParquetArrow writes rows with arrow-go's pqarrow (dictionary
// encoding on, small pages and row groups), the way an Arrow-based stage of
// the engine would.
func writeParquetArrow(t *testing.T, path string, rows []row, perGroup int64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Small write batches make the small page size take effect; no page
	// index, so seeking must skip pages by their row counts.
	props := pqfile.NewWriterProperties(pqfile.WithMaxRowGroupLength(perGroup), pqfile.WithDataPageSize(1024),
		pqfile.WithBatchSize(64), pqfile.WithDictionaryDefault(true), pqfile.WithAllocator(mem))
	w, err := pqarrow.NewFileWriter(Schema, f, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem)))
	if err != nil {
		t.Fatal(err)
	}
	c := newCols(mem, len(rows))
	for i, r := range rows {
		c.id[i], c.key[i], c.value[i], c.ts[i] = r[0], r[1], r[2], r[3]
	}
	rec := c.finish()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkSuffixes reads every partition fully, compares with want, then
// re-reads from random positions and compares with the suffix.
func checkSuffixes(t *testing.T, seed int64, rng *rand.Rand, src Source, mem memory.Allocator, want [][]row) {
	t.Helper()
	if !src.Rereadable() || !src.Bounded() {
		t.Fatal("file sources are re-readable and bounded")
	}
	for i := range src.Partitions() {
		got := openRead(t, src, mem, i, 0, 1+rng.IntN(700))
		if !slices.Equal(got, want[i]) {
			t.Fatalf("seed=%d: partition %d: full read differs (%d rows, want %d)", seed, i, len(got), len(want[i]))
		}
	}
	for k := 0; k < 30; k++ {
		i := rng.IntN(len(want))
		off := rng.Int64N(int64(len(want[i])) + 1)
		max := 1 + rng.IntN(900)
		got := openRead(t, src, mem, i, off, max)
		if !slices.Equal(got, want[i][off:]) {
			t.Fatalf("seed=%d: partition %d from %d (max %d): not the suffix", seed, i, off, max)
		}
	}
}

func TestFileCSV(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 2))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	rows := randRows(rng, 0, 2500)
	p := filepath.Join(dir, "in.csv")
	writeCSV(t, p, rows, 97, rng.IntN(2) == 0)
	src := mustOpen(t, "file:"+p, Options{})
	defer src.Close()
	if got := src.Partitions(); !slices.Equal(got, []string{"in.csv"}) {
		t.Fatalf("partitions %v", got)
	}
	checkSuffixes(t, seed, rng, src, mem, [][]row{rows})
}

func TestFileParquet(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		write func(*testing.T, string, []row, int64)
	}{{"parquet-go", writeParquetGo}, {"pqarrow", writeParquetArrow}} {
		rows := randRows(rng, 0, 3000)
		p := filepath.Join(dir, tc.name+".parquet")
		tc.write(t, p, rows, 700)
		src := mustOpen(t, "file:"+p, Options{})
		checkSuffixes(t, seed, rng, src, mem, [][]row{rows})
		src.Close()
	}
}

func TestFileDir(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 4))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	a := randRows(rng, 0, 1200)
	b := randRows(rng, 1200, 0) // an empty file is an empty partition
	c := randRows(rng, 1200, 2100)
	d := randRows(rng, 3300, 900)
	writeParquetGo(t, filepath.Join(dir, "00-c.parquet"), c, 500)
	writeCSV(t, filepath.Join(dir, "01-a.csv"), a, 0, false)
	writeCSV(t, filepath.Join(dir, "02-b.csv"), b, 0, false)
	writeParquetArrow(t, filepath.Join(dir, "03-d.data"), d, 256) // sniffed by its magic bytes
	for _, junk := range []string{"_SUCCESS", ".03-d.data.crc", "_tmp.csv"} {
		if err := os.WriteFile(filepath.Join(dir, junk), []byte("not data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := mustOpen(t, "file:"+dir, Options{})
	defer src.Close()
	if got, want := src.Partitions(), []string{"00-c.parquet", "01-a.csv", "02-b.csv", "03-d.data"}; !slices.Equal(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	checkSuffixes(t, seed, rng, src, mem, [][]row{c, a, b, d})
}

func TestFileErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	dir := t.TempDir()
	put := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := func(p string) error {
		src, err := Open("file:"+p, Options{})
		if err == nil {
			src.Close()
		}
		return err
	}

	wantErr(t, open(filepath.Join(dir, "nope.csv")), "nope.csv does not exist")
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	os.WriteFile(filepath.Join(empty, "_SUCCESS"), nil, 0o644)
	wantErr(t, open(empty), "has no input files", "names starting with _ or . are ignored")
	wantErr(t, open(put("zero.csv", "")), "empty file", csvHeader)
	wantErr(t, open(put("hdr.csv", "id,key,val,ts\n1,2,3,4\n")), "hdr.csv:1", "wrong header", `want exactly "id,key,value,ts"`)
	wantErr(t, open(put("order.csv", "key,id,value,ts\n")), "wrong header")

	// Row errors surface from Next, after the good rows before them, and name
	// file:line.
	readErr := func(p string, offset int64) error {
		src, err := Open("file:"+p, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer src.Close()
		r, err := src.Open(ctx, 0, Position{Partition: filepath.Base(p), Offset: offset}, mem)
		if err != nil {
			return err
		}
		defer r.Close()
		for {
			b, _, err := r.Next(ctx, 100)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			b.Release()
		}
	}
	wantErr(t, readErr(put("bad.csv", csvHeader+"\n1,2,3,4\n5,x,7,8\n"), 0), "bad.csv:3", `field key="x" is not an int64`)
	wantErr(t, readErr(put("float.csv", csvHeader+"\n1,2,3.5,4\n"), 0), "float.csv:2", `field value="3.5"`)
	wantErr(t, readErr(put("short.csv", csvHeader+"\n1,2,3\n"), 0), "short.csv:2", "3 fields, want 4")
	wantErr(t, readErr(put("long.csv", csvHeader+"\n1,2,3,4,5\n"), 0), "long.csv:2", "5 fields, want 4")
	wantErr(t, readErr(put("big.csv", csvHeader+"\n1,2,3,99999999999999999999\n"), 0), "big.csv:2", "not an int64")
	// Skipping validates the rows it skips.
	wantErr(t, readErr(put("skipbad.csv", csvHeader+"\n1,2,3,4\nz,2,3,4\n3,2,3,4\n"), 3), "skipbad.csv:3")

	// Positions.
	two := put("two.csv", csvHeader+"\n1,2,3,4\n5,6,7,8\n")
	wantErr(t, readErr(two, 3), "two.csv", "position 3 is beyond the end (2 rows)")
	if err := readErr(two, 2); err != nil {
		t.Fatalf("position at the end: %v", err)
	}
	src := mustOpen(t, "file:"+two, Options{})
	_, err := src.Open(ctx, 0, Position{Partition: "other.csv", Offset: 1}, mem)
	wantErr(t, err, `position names partition "other.csv"`, `"two.csv"`)
	_, err = src.Open(ctx, 1, Position{Partition: "two.csv"}, mem)
	wantErr(t, err, "out of range")
	r, err := src.Open(ctx, 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Next(ctx, -1)
	wantErr(t, err, "max=-1")
	r.Close()
	_, _, err = r.Next(ctx, 1)
	wantErr(t, err, "closed reader")
	src.Close()

	// Parquet: schema and content errors.
	rows := []row{{1, 2, 3, 4}, {5, 6, 7, 8}}
	good := filepath.Join(dir, "good.parquet")
	writeParquetGo(t, good, rows, 1)
	wantErr(t, readErr(good, 3), "good.parquet", "position 3 is beyond the end (2 rows)")
	if err := readErr(good, 2); err != nil {
		t.Fatalf("parquet position at the end: %v", err)
	}
	type missing struct {
		ID    int64 `parquet:"id"`
		Key   int64 `parquet:"key"`
		Value int64 `parquet:"value"`
	}
	type mistyped struct {
		ID    int64  `parquet:"id"`
		Key   int64  `parquet:"key"`
		Value int64  `parquet:"value"`
		TS    string `parquet:"ts"`
	}
	type int32ts struct {
		ID    int64 `parquet:"id"`
		Key   int64 `parquet:"key"`
		Value int64 `parquet:"value"`
		TS    int32 `parquet:"ts"`
	}
	type repeated struct {
		ID    int64   `parquet:"id"`
		Key   []int64 `parquet:"key"`
		Value int64   `parquet:"value"`
		TS    int64   `parquet:"ts"`
	}
	type nullable struct {
		ID    int64  `parquet:"id"`
		Key   int64  `parquet:"key"`
		Value *int64 `parquet:"value,optional"`
		TS    int64  `parquet:"ts"`
	}
	seven := int64(7)
	wantErr(t, open(writePQ(t, dir, "missing.parquet", []missing{{1, 2, 3}})), "missing.parquet", `no column "ts"`, "file has id,key,value")
	wantErr(t, open(writePQ(t, dir, "mistyped.parquet", []mistyped{{1, 2, 3, "x"}})), `column "ts" has type STRING (physical BYTE_ARRAY)`, "want int64")
	wantErr(t, open(writePQ(t, dir, "int32.parquet", []int32ts{{1, 2, 3, 4}})), `column "ts" has type INT(32,true) (physical INT32)`)
	wantErr(t, open(writePQ(t, dir, "repeated.parquet", []repeated{{1, []int64{2}, 3, 4}})), `column "key" is repeated`)
	nulls := writePQ(t, dir, "nulls.parquet", []nullable{{1, 2, &seven, 4}, {5, 6, nil, 8}})
	wantErr(t, readErr(nulls, 0), "nulls.parquet", `column "value" has a null`)
	// An optional column without nulls is fine.
	if err := readErr(writePQ(t, dir, "opt.parquet", []nullable{{1, 2, &seven, 4}}), 0); err != nil {
		t.Fatalf("optional column without nulls: %v", err)
	}
	wantErr(t, open(put("junk.parquet", "this is not parquet at all")), "junk.parquet", "not a readable Parquet file")
	wantErr(t, open(put("PAR1.csv", "PAR1 but truncated")), "not a readable Parquet file")
}

// writePQ writes rows of any struct type with parquet-go and returns the path.
func writePQ[T any](t *testing.T, dir, name string, rows []T) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := parquet.WriteFile(p, rows); err != nil {
		t.Fatal(err)
	}
	return p
}

// BenchmarkFile measures reading CSV and Parquet back through the Reader.
func BenchmarkFile(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := b.TempDir()
	const n = 200_000
	rows := randRows(rng, 0, n)
	csvPath := filepath.Join(dir, "b.csv")
	var buf bytes.Buffer
	buf.WriteString(csvHeader + "\n")
	for _, r := range rows {
		for c, v := range r {
			if c > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(strconv.FormatInt(v, 10))
		}
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(csvPath, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	pqPath := filepath.Join(dir, "b.parquet")
	pr := make([]pqRow, n)
	for i, r := range rows {
		pr[i] = pqRow{r[0], r[1], r[2], r[3], ""}
	}
	if err := parquet.WriteFile(pqPath, pr); err != nil {
		b.Fatal(err)
	}
	for _, p := range []string{csvPath, pqPath} {
		b.Run(filepath.Ext(p)[1:], func(b *testing.B) {
			src := mustOpen(b, "file:"+p, Options{})
			defer src.Close()
			ctx := context.Background()
			cpu0 := cpuTime()
			total := 0
			for i := 0; i < b.N; i++ {
				r, err := src.Open(ctx, 0, Position{}, memory.DefaultAllocator)
				if err != nil {
					b.Fatal(err)
				}
				for {
					rec, _, err := r.Next(ctx, 8192)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					total += int(rec.NumRows())
					rec.Release()
				}
				r.Close()
			}
			b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "Mrec/s")
			b.ReportMetric(float64(total)/(cpuTime()-cpu0).Seconds()/1e6, "Mrec/cpu-s")
		})
	}
}
