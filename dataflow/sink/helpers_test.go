package sink

import (
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"go.uber.org/goleak"

	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// testLayout has a two-column write key, a payload and the version, with
// the version deliberately not last so column order matters.
func testLayout() Layout {
	i := arrow.PrimitiveTypes.Int64
	return Layout{
		Schema: arrow.NewSchema([]arrow.Field{
			{Name: "k1", Type: i}, {Name: "k2", Type: i}, {Name: VersionColumn, Type: i}, {Name: "value", Type: i},
		}, nil),
		WriteKey: []string{"k1", "k2"},
	}
}

var formats = []Format{Parquet, CSV}

// newRand returns a generator seeded by testseed (REWIND_TEST_SEED replays
// a failure; a failing test logs its seed).
func newRand(t testing.TB) (*rand.Rand, uint64) {
	t.Helper()
	seed := testseed.Seed(t)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed
}

func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// gen produces rows whose (key, _version) pairs are unique across the run:
// versions come from a shared counter, handed out in shuffled order so
// that a key's versions arrive out of order.
type gen struct {
	r     *rand.Rand
	vers  []int64
	keys  int64
	order []string
}

func newGen(r *rand.Rand, keys int64, total int) *gen {
	g := &gen{r: r, keys: keys}
	g.vers = make([]int64, total)
	for i := range g.vers {
		g.vers[i] = int64(i) * 3 // gaps, so no version is "next" by accident
	}
	r.Shuffle(len(g.vers), func(i, j int) { g.vers[i], g.vers[j] = g.vers[j], g.vers[i] })
	return g
}

// rows returns n rows in testLayout order (k1, k2, _version, value).
func (g *gen) rows(n int) [][]int64 {
	out := make([][]int64, n)
	for i := range out {
		if len(g.vers) == 0 {
			panic("gen: out of versions")
		}
		v := g.vers[0]
		g.vers = g.vers[1:]
		k := g.r.Int64N(g.keys)
		out[i] = []int64{k % 7, k - 3, v, g.r.Int64() - g.r.Int64()}
	}
	return out
}

// batchOf builds a record batch from rows laid out as the layout's schema.
// The column order of the batch can be permuted to check that writers map
// columns by name.
func batchOf(t testing.TB, mem memory.Allocator, layout Layout, rows [][]int64, perm []int) arrow.RecordBatch {
	t.Helper()
	n := layout.Schema.NumFields()
	if perm == nil {
		perm = make([]int, n)
		for i := range perm {
			perm[i] = i
		}
	}
	fields := make([]arrow.Field, n)
	cols := make([]arrow.Array, n)
	for j, src := range perm {
		fields[j] = layout.Schema.Field(src)
		b := array.NewInt64Builder(mem)
		b.Reserve(len(rows))
		for _, r := range rows {
			b.UnsafeAppend(r[src])
		}
		cols[j] = b.NewArray()
		b.Release()
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows)))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func write(t testing.TB, mem memory.Allocator, w Writer, layout Layout, epoch int64, rows [][]int64) {
	t.Helper()
	b := batchOf(t, mem, layout, rows, nil)
	defer b.Release()
	if err := w.Write(epoch, b); err != nil {
		t.Fatalf("write epoch %d: %v", epoch, err)
	}
}

func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// fixture is the start most sink tests share: a checked allocator that
// must end empty, the test layout and a fresh output directory. Its
// methods fail the test on any error, so a test body reads as the sink
// calls it makes and the checks it asserts. Tests that need randomness
// call newRand themselves, before newFixture, so the seed is theirs to see.
type fixture struct {
	t      testing.TB
	mem    *memory.CheckedAllocator
	layout Layout
	dir    string
}

func newFixture(t testing.TB) *fixture {
	return &fixture{t: t, mem: newMem(t), layout: testLayout(), dir: t.TempDir()}
}

// open opens a sink over the fixture's directory.
func (f *fixture) open(mode Mode, format Format) Sink {
	f.t.Helper()
	return openSink(f.t, f.dir, mode, format, f.layout, f.mem)
}

func (f *fixture) writer(s Sink, subtask, attempt int) Writer {
	f.t.Helper()
	w, err := s.Writer(subtask, attempt)
	must(f.t, err, fmt.Sprintf("writer for subtask %d attempt %d", subtask, attempt))
	return w
}

// write writes rows to w as one batch of epoch.
func (f *fixture) write(w Writer, epoch int64, rows [][]int64) {
	f.t.Helper()
	write(f.t, f.mem, w, f.layout, epoch, rows)
}

// wantResolved fails the test unless the directory resolves to the
// oracle's table for rows. It returns that table and the directory's
// stats, for the checks that differ from test to test.
func (f *fixture) wantResolved(rows [][]int64) (*Table, Stats) {
	f.t.Helper()
	got, st := resolve(f.t, f.dir, f.layout)
	want, _ := oracle(f.t, f.layout, rows)
	wantTable(f.t, got, want)
	return want, st
}

// read reads the directory's visible files with independentRead.
func (f *fixture) read() ([][]int64, int) {
	f.t.Helper()
	return independentRead(f.t, f.dir, f.layout)
}

func openSink(t testing.TB, dir string, mode Mode, format Format, layout Layout, mem memory.Allocator) Sink {
	t.Helper()
	s, err := Open(dir, mode, format, layout, mem)
	if err != nil {
		t.Fatalf("open %s sink (%s) in %s: %v", mode, format, dir, err)
	}
	return s
}

// oracle resolves rows in memory, without any file involved.
func oracle(t testing.TB, layout Layout, rows [][]int64) (*Table, Stats) {
	t.Helper()
	tb, st, err := ResolveRows(layout, ColumnNames(layout.Schema), rows)
	if err != nil {
		t.Fatal(err)
	}
	return tb, st
}

func resolve(t testing.TB, dir string, layout Layout) (*Table, Stats) {
	t.Helper()
	tb, st, err := Resolve(dir, layout)
	if err != nil {
		t.Fatalf("resolve %s: %v", dir, err)
	}
	return tb, st
}

func wantTable(t testing.TB, got, want *Table) {
	t.Helper()
	if d := got.Diff(want, 10); d != "" {
		t.Fatalf("resolved table differs from expected: %s", d)
	}
}

// independentRead reads the visible data files of dir without this
// package's reader: Parquet through arrow-go's pqarrow, CSV through
// encoding/csv. It checks each file's schema against the layout and
// returns the rows in layout column order, plus the number of files.
func independentRead(t testing.TB, dir string, layout Layout) ([][]int64, int) {
	t.Helper()
	cols := ColumnNames(layout.Schema)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]int64
	files := 0
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		files++
		switch filepath.Ext(name) {
		case ".parquet":
			rows = append(rows, readWithArrow(t, path, cols)...)
		case ".csv":
			rows = append(rows, readWithCSV(t, path, cols)...)
		default:
			t.Fatalf("unexpected visible file %s", path)
		}
	}
	return rows, files
}

func readWithArrow(t testing.TB, path string, cols []string) [][]int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("pqarrow: open %s: %v", path, err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{BatchSize: 1 << 14}, mem)
	if err != nil {
		t.Fatalf("pqarrow: %s: %v", path, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("pqarrow: read %s: %v", path, err)
	}
	defer tbl.Release()
	sc := tbl.Schema()
	if got := ColumnNames(sc); !slices.Equal(got, cols) {
		t.Fatalf("pqarrow: %s has columns %v, want %v in this order", path, got, cols)
	}
	for _, f := range sc.Fields() {
		if f.Type.ID() != arrow.INT64 || f.Nullable {
			t.Fatalf("pqarrow: %s column %q is %s nullable=%v, want required int64", path, f.Name, f.Type, f.Nullable)
		}
	}
	n := int(tbl.NumRows())
	rows := make([][]int64, n)
	for i := range rows {
		rows[i] = make([]int64, len(cols))
	}
	for c := range cols {
		r := 0
		for _, ch := range tbl.Column(c).Data().Chunks() {
			a := ch.(*array.Int64)
			if a.NullN() != 0 {
				t.Fatalf("pqarrow: %s column %q has nulls", path, cols[c])
			}
			for _, v := range a.Int64Values() {
				rows[r][c] = v
				r++
			}
		}
		if r != n {
			t.Fatalf("pqarrow: %s column %q has %d values for %d rows", path, cols[c], r, n)
		}
	}
	return rows
}

func readWithCSV(t testing.TB, path string, cols []string) [][]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("csv: read %s: %v", path, err)
	}
	if len(recs) == 0 || !slices.Equal(recs[0], cols) {
		t.Fatalf("csv: %s header is %v, want %v", path, recs[:min(1, len(recs))], cols)
	}
	var rows [][]int64
	for _, rec := range recs[1:] {
		row := make([]int64, len(rec))
		for i, s := range rec {
			if row[i], err = strconv.ParseInt(s, 10, 64); err != nil {
				t.Fatalf("csv: %s: %v", path, err)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// countDuplicates counts extra copies of (write key, _version), the way the
// contract defines them, independently of ResolveRows.
func countDuplicates(layout Layout, rows [][]int64) int64 {
	cols := ColumnNames(layout.Schema)
	var idx []int
	for _, k := range layout.WriteKey {
		idx = append(idx, slices.Index(cols, k))
	}
	idx = append(idx, slices.Index(cols, VersionColumn))
	count := map[string]int64{}
	for _, r := range rows {
		var b strings.Builder
		for _, i := range idx {
			fmt.Fprintf(&b, "%d|", r[i])
		}
		count[b.String()]++
	}
	var d int64
	for _, n := range count {
		d += n - 1
	}
	return d
}

// sameMultiset reports whether a and b hold the same rows, counting copies.
func sameMultiset(a, b [][]int64) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, slices.Compare)
	slices.SortFunc(b, slices.Compare)
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func visibleNames(t testing.TB, dir string) []string {
	t.Helper()
	return slices.DeleteFunc(dirNames(t, dir), func(n string) bool { return !isVisible(n) })
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func parquetRowGroups(t testing.TB, path string) int {
	t.Helper()
	rdr, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer rdr.Close()
	return rdr.NumRowGroups()
}

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
