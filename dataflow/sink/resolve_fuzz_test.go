package sink

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
)

// FuzzParseStaged: a staging name is taken only in the spelling stagedName
// writes, and then maps back to that name.
func FuzzParseStaged(f *testing.F) {
	f.Add(stagedName(stageKey{epoch: 3, subtask: 1, attempt: 2}, 0, Parquet))
	f.Add(stagedName(stageKey{epoch: 1 << 40, subtask: 0, attempt: 0}, 7, CSV))
	f.Add("e01-s1-a0-p0.csv")
	f.Add("e-1-s1-a0-p0.parquet")
	f.Fuzz(func(t *testing.T, name string) {
		sf, ok := parseStaged(name)
		if !ok {
			return
		}
		format, _ := formatOfName(name)
		if got := stagedName(sf.stageKey, sf.part, format); got != name || sf.name != name {
			t.Fatalf("%q parsed as %+v, which is named %q", name, sf, got)
		}
		if sf.epoch < 0 || sf.subtask < 0 || sf.attempt < 0 || sf.part < 0 {
			t.Fatalf("%q parsed with a negative field: %+v", name, sf)
		}
		if _, ok := parseVisibleEpoch(sf.visibleName()); !ok {
			t.Fatalf("visible name %q of %q does not parse", sf.visibleName(), name)
		}
	})
}

// FuzzParseVisibleEpoch: a published name's epoch is read only from the
// spelling visibleName writes.
func FuzzParseVisibleEpoch(f *testing.F) {
	f.Add(stagedFile{stageKey: stageKey{epoch: 9, subtask: 2}, part: 1, name: "x.parquet"}.visibleName())
	f.Add("part-e+1-s0-p0.csv")
	f.Add("part-e1-s0-p0-x.csv")
	f.Fuzz(func(t *testing.T, name string) {
		e, ok := parseVisibleEpoch(name)
		if !ok {
			return
		}
		if e < 0 {
			t.Fatalf("%q parsed as epoch %d", name, e)
		}
		if !strings.HasPrefix(name, fmt.Sprintf("part-e%d-s", e)) {
			t.Fatalf("%q parsed as epoch %d", name, e)
		}
	})
}

// FuzzReadDataFile: bytes given as a visible Parquet or CSV file either
// read as rows of the layout that, written again by the sink's encoder,
// read back the same, or give an error; never a panic or an allocation
// sized by a row count the file cannot hold.
func FuzzReadDataFile(f *testing.F) {
	sh, err := newShape(testLayout())
	if err != nil {
		f.Fatal(err)
	}
	for _, format := range formats {
		for _, rows := range []int{0, 1, 5} {
			cols := make([][]int64, len(sh.cols))
			for c := range cols {
				for r := range rows {
					cols[c] = append(cols[c], int64(r*10+c-2))
				}
			}
			var buf bytes.Buffer
			if err := encodeFile(format, sh, [][][]int64{cols})(&buf); err != nil {
				f.Fatal(err)
			}
			f.Add(format == Parquet, buf.Bytes())
		}
	}
	f.Add(false, []byte("k1,k2,_version,value\n1,2,3,x\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, isParquet bool, data []byte) {
		format, path := CSV, filepath.Join(dir, "f.csv")
		if isParquet {
			format, path = Parquet, filepath.Join(dir, "f.parquet")
		}
		before := heapAllocated()
		rows, err := readFile(t, format, path, data, sh)
		if a := heapAllocated() - before; a > 64<<20+1024*uint64(len(data)) {
			t.Fatalf("reading a %d-byte file allocated %d bytes", len(data), a)
		}
		if err != nil {
			return
		}
		cols := make([][]int64, len(sh.cols))
		for _, r := range rows {
			if len(r) != len(sh.cols) {
				t.Fatalf("row %v has %d columns, layout %d", r, len(r), len(sh.cols))
			}
			for c, v := range r {
				cols[c] = append(cols[c], v)
			}
		}
		var buf bytes.Buffer
		if err := encodeFile(format, sh, [][][]int64{cols})(&buf); err != nil {
			t.Fatalf("rows read do not encode: %v", err)
		}
		back, err := readFile(t, format, path, buf.Bytes(), sh)
		if err != nil {
			t.Fatalf("re-encoded file does not read: %v", err)
		}
		if !slices.EqualFunc(rows, back, slices.Equal) {
			t.Fatalf("rows changed in a round trip:\n %v\n %v", rows, back)
		}
	})
}

func readFile(t *testing.T, format Format, path string, data []byte, sh *shape) ([][]int64, error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if format == Parquet {
		return readParquet(path, sh, nil)
	}
	return readCSV(path, sh, nil)
}

// heapAllocated is the bytes the Go heap has handed out so far: parquet-go
// allocates with make, so the fuzz body bounds it from outside.
func heapAllocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
