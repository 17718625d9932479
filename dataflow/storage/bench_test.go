package storage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage/storagetest"
)

// Local Put is compared against the floor it cannot beat: writing the same
// bytes to a file in the same directory and fsyncing it. Put adds the
// CRC32C, a trailer write, a rename and a directory fsync.

var benchSizes = []int{1 << 20, 16 << 20}

func sizeName(n int) string { return fmt.Sprintf("%dMiB", n>>20) }

// plainWrite is the baseline: create (or truncate), write, fsync, close.
func plainWrite(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func BenchmarkLocalPut(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			st := openLocalTest(b, b.TempDir())
			data := storagetest.Payload(1, n)
			ctx := context.Background()
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := st.Put(ctx, "bench/obj", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPlainWriteFsync(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "bench")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			data := storagetest.Payload(1, n)
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := plainWrite(filepath.Join(dir, "plain"), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLocalPutVsPlain alternates a Put and a plain write+fsync of
// the same bytes in the same directory, so both see the same disk and the
// same machine noise, and reports each one's MB/s, their ratio (target:
// put/plain >= 0.8) and the median of the per-iteration ratios. Each iteration writes fresh names, as recovery points
// do (b.TempDir removes them at the end); the order of the two writes
// alternates.
func BenchmarkLocalPutVsPlain(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			root := b.TempDir()
			st := openLocalTest(b, root)
			data := storagetest.Payload(1, n)
			ctx := context.Background()
			if err := st.Put(ctx, "bench/keep", nil); err != nil { // creates bench/
				b.Fatal(err)
			}
			dir := filepath.Join(root, "bench")
			var putT, plainT time.Duration
			var ratios []float64 // per iteration: robust to the spikes of a noisy disk
			i := 0
			var putI, plainI time.Duration
			put := func() {
				t0 := time.Now()
				if err := st.Put(ctx, fmt.Sprintf("bench/obj-%d", i), data); err != nil {
					b.Fatal(err)
				}
				putI = time.Since(t0)
				putT += putI
			}
			plain := func() {
				t0 := time.Now()
				if err := plainWrite(filepath.Join(dir, fmt.Sprintf("plain-%d", i)), data); err != nil {
					b.Fatal(err)
				}
				plainI = time.Since(t0)
				plainT += plainI
			}
			for b.Loop() {
				if i%2 == 0 {
					put()
					plain()
				} else {
					plain()
					put()
				}
				ratios = append(ratios, plainI.Seconds()/putI.Seconds())
				i++
			}
			slices.Sort(ratios)
			mb := float64(n) * float64(b.N) / 1e6
			b.ReportMetric(mb/putT.Seconds(), "put-MB/s")
			b.ReportMetric(mb/plainT.Seconds(), "plain-MB/s")
			b.ReportMetric(plainT.Seconds()/putT.Seconds(), "put/plain")
			b.ReportMetric(ratios[len(ratios)/2], "median-put/plain")
		})
	}
}

func BenchmarkLocalGet(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			st := openLocalTest(b, b.TempDir())
			data := storagetest.Payload(1, n)
			ctx := context.Background()
			if err := st.Put(ctx, "bench/obj", data); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := st.Get(ctx, "bench/obj"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkS3Put(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			st := openS3Test(b)
			data := storagetest.Payload(1, n)
			ctx := context.Background()
			b.SetBytes(int64(n))
			for b.Loop() {
				if err := st.Put(ctx, "bench/obj", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkS3Get(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			st := openS3Test(b)
			data := storagetest.Payload(1, n)
			ctx := context.Background()
			if err := st.Put(ctx, "bench/obj", data); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := st.Get(ctx, "bench/obj"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
