package sink

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// benchRows is a job-like output: small keys, increasing versions, wide
// random values.
func benchRows(n int) [][]int64 {
	r := rand.New(rand.NewPCG(1, 2))
	rows := make([][]int64, n)
	for i := range rows {
		rows[i] = []int64{int64(r.IntN(1000)), int64(r.IntN(100)), int64(i), r.Int64N(1 << 40)}
	}
	return rows
}

// BenchmarkAppendFlush measures Write + Flush of one batch per operation in
// the append sink: encoding, the synced temporary file, the link and the
// directory sync. MB/s counts the raw int64 input (8 bytes per value);
// file_MB/s the bytes that reached the file.
func BenchmarkAppendFlush(b *testing.B) {
	layout := testLayout()
	for _, format := range formats {
		for _, n := range []int{1 << 12, 1 << 16, 1 << 20} {
			b.Run(fmt.Sprintf("%s/rows=%d", format, n), func(b *testing.B) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(b, 0)
				dir := b.TempDir()
				s := openSink(b, dir, Append, format, layout, mem)
				defer s.Close()
				w, err := s.Writer(0, 0)
				must(b, err, "writer")
				defer w.Close()
				batch := batchOf(b, mem, layout, benchRows(n), nil)
				defer batch.Release()
				b.SetBytes(int64(n) * int64(layout.Schema.NumFields()) * 8)
				ops := 0
				for b.Loop() {
					if err := w.Write(0, batch); err != nil {
						b.Fatal(err)
					}
					if err := w.Flush(0); err != nil {
						b.Fatal(err)
					}
					ops++
				}
				var size int64
				for _, name := range visibleNames(b, dir) {
					fi, err := os.Stat(filepath.Join(dir, name))
					must(b, err, "stat")
					size += fi.Size()
				}
				secs := b.Elapsed().Seconds()
				b.ReportMetric(float64(n*ops)/secs, "rows/s")
				b.ReportMetric(float64(size)/secs/1e6, "file_MB/s")
				b.ReportMetric(float64(size)/float64(n*ops), "file_B/row")
			})
		}
	}
}

// BenchmarkResolve measures reading back and resolving 1M rows in 16 files.
func BenchmarkResolve(b *testing.B) {
	layout := testLayout()
	const files, per = 16, 1 << 16
	for _, format := range formats {
		b.Run(string(format), func(b *testing.B) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(b, 0)
			dir := b.TempDir()
			s := openSink(b, dir, Append, format, layout, mem)
			w, err := s.Writer(0, 0)
			must(b, err, "writer")
			rows := benchRows(files * per)
			for f := 0; f < files; f++ {
				write(b, mem, w, layout, 0, rows[f*per:(f+1)*per])
				must(b, w.Flush(0), "flush")
			}
			must(b, w.Close(), "close")
			must(b, s.Close(), "close")
			b.SetBytes(int64(files * per * layout.Schema.NumFields() * 8))
			ops := 0
			for b.Loop() {
				if _, _, err := Resolve(dir, layout); err != nil {
					b.Fatal(err)
				}
				ops++
			}
			b.ReportMetric(float64(files*per*ops)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkEncode isolates the CPU cost of encoding from the disk: the
// same rows as BenchmarkAppendFlush, written to io.Discard.
func BenchmarkEncode(b *testing.B) {
	layout := testLayout()
	sh, err := newShape(layout)
	must(b, err, "shape")
	const n = 1 << 16
	rows := benchRows(n)
	cols := make([][]int64, 4)
	for c := range cols {
		cols[c] = make([]int64, n)
		for r := range rows {
			cols[c][r] = rows[r][c]
		}
	}
	for _, format := range formats {
		b.Run(string(format), func(b *testing.B) {
			b.SetBytes(n * 4 * 8)
			ops := 0
			for b.Loop() {
				if err := encodeFile(format, sh, [][][]int64{cols})(io.Discard); err != nil {
					b.Fatal(err)
				}
				ops++
			}
			b.ReportMetric(float64(n*ops)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
