package runtest

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// IndependentDuplicates counts, among the visible rows of an output
// directory, the extra copies of a row (dups) and the rows that share write
// key and _version with an earlier row but differ from it (conflicts): what
// sink.Resolve reports as DuplicateRows and ConflictingRows. It reads the
// files with readers of its own and shares no code with sink.Resolve, so a
// bug there cannot hide itself here. Every visible file (name not starting
// with _ or .) must be of the given format.
func IndependentDuplicates(t testing.TB, dir string, format sink.Format, layout sink.Layout) (dups, conflicts int64) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cols := sink.ColumnNames(layout.Schema)
	var keyIdx []int // in cols: write key, then _version
	for _, k := range append(slices.Clone(layout.WriteKey), sink.VersionColumn) {
		i := slices.Index(cols, k)
		if i < 0 {
			t.Fatalf("layout has no column %s (columns %v)", k, cols)
		}
		keyIdx = append(keyIdx, i)
	}
	seen := map[string]string{} // key -> the first whole row with it
	count := func(row []string) {
		var key, whole strings.Builder
		for _, i := range keyIdx {
			key.WriteString(row[i])
			key.WriteByte(',')
		}
		for _, f := range row {
			whole.WriteString(f)
			whole.WriteByte(',')
		}
		if first, ok := seen[key.String()]; !ok {
			seen[key.String()] = whole.String()
		} else if first == whole.String() {
			dups++
		} else {
			conflicts++
		}
	}
	// The files in name order, an append writer's tail (its in-progress
	// file) under the name it rolls to, unless that file is there.
	files := map[string]string{}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "_") || strings.HasPrefix(n, ".") || e.IsDir() {
			continue
		}
		if !strings.HasSuffix(n, "."+string(format)) {
			t.Fatalf("visible file %s is not %s", n, format)
		}
		files[n] = filepath.Join(dir, n)
		names = append(names, n)
	}
	tails, err := os.ReadDir(filepath.Join(dir, sink.InProgressDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range tails {
		if _, rolled := files[e.Name()]; !rolled && strings.HasPrefix(e.Name(), "part-") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if path, ok := files[n]; ok {
			readRows(t, path, format, cols, count)
		} else {
			tailRows(t, filepath.Join(dir, sink.InProgressDir, n), len(cols), count)
		}
	}
	return dups, conflicts
}

// tailRows calls row with every row of the complete segments of an append
// tail (dataflow/sink/roll.go): a 24-byte header ("RWSG", columns uint32,
// rows uint64, CRC32C of the payload, CRC32C of the header's first 20
// bytes), then each column's int64 values, little endian. An end cut short
// holds no rows yet; a segment that fails a checksum fails the test.
func tailRows(t testing.TB, path string, ncols int, row func([]string)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tab := crc32.MakeTable(crc32.Castagnoli)
	for off := 0; len(b)-off >= 24; {
		h := b[off : off+24]
		n := int(binary.LittleEndian.Uint64(h[8:]))
		if string(h[:4]) != "RWSG" || crc32.Checksum(h[:20], tab) != binary.LittleEndian.Uint32(h[20:]) ||
			int(binary.LittleEndian.Uint32(h[4:])) != ncols {
			t.Fatalf("%s: bad segment header at byte %d", path, off)
		}
		end := off + 24 + n*ncols*8
		if n < 0 || end > len(b) || end < off {
			return
		}
		p := b[off+24 : end]
		if crc32.Checksum(p, tab) != binary.LittleEndian.Uint32(h[16:]) {
			t.Fatalf("%s: segment at byte %d fails its checksum", path, off)
		}
		for i := 0; i < n; i++ {
			out := make([]string, ncols)
			for c := range out {
				out[c] = strconv.FormatInt(int64(binary.LittleEndian.Uint64(p[(c*n+i)*8:])), 10)
			}
			row(out)
		}
		off = end
	}
}

// readRows calls row with every row of the file at path, its values as text
// in the order of cols.
func readRows(t testing.TB, path string, format sink.Format, cols []string, row func([]string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch format {
	case sink.CSV:
		csvRows(t, f, cols, row)
	case sink.Parquet:
		parquetRows(t, f, cols, row)
	default:
		t.Fatalf("no reader for format %q", format)
	}
}

// csvRows calls row with every data row of a CSV file, its fields in the
// order of cols, so files with another column order compare equal.
func csvRows(t testing.TB, f *os.File, cols []string, row func([]string)) {
	t.Helper()
	path := f.Name()
	sc := bufio.NewScanner(f)
	var idx []int // in the file, for each of cols
	width := 0    // fields of the header
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ",")
		if idx == nil {
			width = len(fields)
			for _, c := range cols {
				i := slices.Index(fields, c)
				if i < 0 {
					t.Fatalf("%s has no column %s", path, c)
				}
				idx = append(idx, i)
			}
			continue
		}
		if len(fields) != width {
			t.Fatalf("%s: row %q has %d fields, the header %d", path, sc.Text(), len(fields), width)
		}
		out := make([]string, len(idx))
		for j, i := range idx {
			out[j] = fields[i]
		}
		row(out)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// parquetRows calls row with every row of a Parquet file, its int64 values
// as text in the order of cols, read with parquet-go's row reader.
func parquetRows(t testing.TB, f *os.File, cols []string, row func([]string)) {
	t.Helper()
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var idx []int // leaf column index in the file, for each of cols
	for _, c := range cols {
		ci := -1
		for i, p := range pf.Schema().Columns() {
			if len(p) == 1 && p[0] == c {
				ci = i
			}
		}
		if ci < 0 {
			t.Fatalf("%s has no column %s", path, c)
		}
		idx = append(idx, ci)
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	buf := make([]parquet.Row, 256)
	for {
		k, err := r.ReadRows(buf)
		for _, pr := range buf[:k] {
			out := make([]string, len(idx))
			for j, ci := range idx {
				found := false
				for _, v := range pr {
					if v.Column() == ci {
						out[j], found = strconv.FormatInt(v.Int64(), 10), true
					}
				}
				if !found {
					t.Fatalf("%s: a row has no value in column %s", path, cols[j])
				}
			}
			row(out)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}
