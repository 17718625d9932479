package diskphase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// The benchmarks write to b.TempDir(), the machine's real disk, never to a
// RAM disk: materialisation is measured against what the disk can do.
//
// The data is a map unit's output: rows of the gen: source (id, key,
// value, ts) split into 4 reduce partitions of 2^18 rows each, 32 MiB of
// int64 values per operation.

const (
	benchParts = 4
	benchRows  = 1 << 18
)

var benchNames = []string{"id", "key", "value", "ts"}

// benchTables reads the generator and returns benchParts tables.
func benchTables(b *testing.B) [][][]int64 {
	b.Helper()
	src, err := source.Open(fmt.Sprintf("gen:records=%d,keys=1000,partitions=%d,seed=1", benchParts*benchRows, benchParts), source.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	out := make([][][]int64, benchParts)
	for p := range benchParts {
		rd, err := src.Open(context.Background(), p, source.Position{}, memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		cols := newColumns(benchNames)
		for {
			bt, _, err := rd.Next(context.Background(), 1<<16)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := cols.add(bt); err != nil {
				b.Fatal(err)
			}
			bt.Release()
		}
		rd.Close()
		out[p] = cols.cols
	}
	return out
}

// rawBytes is the table's values as bytes, column after column: what a
// plain write of the same data writes.
func rawBytes(cols [][]int64) []byte {
	var buf bytes.Buffer
	for _, c := range cols {
		buf.Write(unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), len(c)*8))
	}
	return buf.Bytes()
}

func benchStore(b *testing.B) storage.Store {
	b.Helper()
	st, err := storage.Open(context.Background(), "file://"+b.TempDir(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// settle flushes what earlier benchmarks left dirty in the page cache, so
// their write-back does not slow this one down, then restarts the timer.
func settle(b *testing.B) {
	syscall.Sync()
	b.ResetTimer()
}

// materialiseParts does what a map unit does with its partitions: encode
// each as Parquet and publish it, the Put of one overlapping the encoding
// of the next. It returns the bytes written.
func materialiseParts(b *testing.B, st storage.Store, parts [][][]int64, comp Compression, enc encoder, iter int) int {
	ctx := context.Background()
	pipe := newPutPipe(ctx, st)
	total := 0
	for r, cols := range parts {
		buf := encodeBufs.Get()
		buf.Reset()
		buf.Grow(len(cols[0])*len(cols)*8 + 4096)
		if err := encodeTable(buf, benchNames, cols, encodeOptions{compression: comp, encoder: enc}); err != nil {
			b.Fatal(err)
		}
		total += buf.Len()
		_ = crc32Of(buf.Bytes()) // the ledger's checksum, as a unit computes it
		if err := pipe.put(fmt.Sprintf("bench/%d/p%d.parquet", iter%4, r), buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := pipe.wait(); err != nil {
		b.Fatal(err)
	}
	return total
}

// plainWrite writes each part's raw bytes to its own file and fsyncs it,
// one after the other: the reference a materialised phase is held to.
func plainWrite(b *testing.B, dir string, raws [][]byte, iter int) {
	for r, raw := range raws {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("plain-%d-%d", iter%4, r)))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(raw); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchCodecs = []Compression{CompressionNone, CompressionSnappy, compressionSnappyBetter, CompressionZstd}

// BenchmarkMaterialise: MB/s of raw values materialised (encode + atomic,
// checksummed Put with fsync), per codec and encoder path, against a plain
// sequential write+fsync of the same bytes and a Store.Put of them.
func BenchmarkMaterialise(b *testing.B) {
	parts := benchTables(b)
	var raws [][]byte
	size := 0
	for _, p := range parts {
		raws = append(raws, rawBytes(p))
		size += len(raws[len(raws)-1])
	}
	for _, comp := range benchCodecs {
		for _, enc := range encoders {
			b.Run(fmt.Sprintf("parquet/%s/%s", comp, enc), func(b *testing.B) {
				st := benchStore(b)
				b.SetBytes(int64(size))
				settle(b)
				written := 0
				for i := 0; i < b.N; i++ {
					written = materialiseParts(b, st, parts, comp, enc, i)
				}
				b.ReportMetric(float64(written)/float64(size), "size-ratio")
			})
		}
	}
	b.Run("plain-write-fsync", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(int64(size))
		settle(b)
		for i := 0; i < b.N; i++ {
			plainWrite(b, dir, raws, i)
		}
	})
	b.Run("store-put-raw", func(b *testing.B) {
		st := benchStore(b)
		b.SetBytes(int64(size))
		settle(b)
		for i := 0; i < b.N; i++ {
			for r, raw := range raws {
				if err := st.Put(context.Background(), fmt.Sprintf("raw/%d/%d", i%4, r), raw); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkMaterialiseRatio compares, within one run so all see the same
// disk and machine noise, three writes of one map unit's output (4
// partitions, 32 MiB of int64 values):
//
//   - parquet: the default materialisation (direct encoder, the codec of
//     the sub-benchmark, Put with two in flight, the ledger's CRC);
//   - plain: the same raw values written to one file per partition with a
//     single write and an fsync each, one after the other (the issue's
//     baseline: same bytes, same fsync, nothing else);
//   - store-raw: the raw values through Store.Put, one after the other
//     (checksum trailer, temporary file, fsync, rename, directory fsync):
//     the store's own price.
//
// The order of the three rotates per iteration. It reports the rates, the
// ratio plain time / parquet time over the run (target >= 0.70) and the
// median of the per-iteration ratios, which a disk stall in one iteration
// does not move.
func BenchmarkMaterialiseRatio(b *testing.B) {
	parts := benchTables(b)
	var raws [][]byte
	size := 0
	for _, p := range parts {
		raws = append(raws, rawBytes(p))
		size += len(raws[len(raws)-1])
	}
	for _, comp := range benchCodecs {
		b.Run(string(comp), func(b *testing.B) {
			st := benchStore(b)
			dir := b.TempDir()
			settle(b)
			var tPq, tPlain, tRaw time.Duration
			var ratios []float64
			for i := 0; i < b.N; i++ {
				writes := []func(){
					func() { materialiseParts(b, st, parts, comp, encoderDirect, i) },
					func() { plainWrite(b, dir, raws, i) },
					func() {
						for r, raw := range raws {
							if err := st.Put(context.Background(), fmt.Sprintf("raw/%d/%d", i%4, r), raw); err != nil {
								b.Fatal(err)
							}
						}
					},
				}
				var d [3]time.Duration
				for k := range writes {
					w := (i + k) % len(writes)
					t0 := time.Now()
					writes[w]()
					d[w] = time.Since(t0)
				}
				tPq += d[0]
				tPlain += d[1]
				tRaw += d[2]
				ratios = append(ratios, d[1].Seconds()/d[0].Seconds())
			}
			slices.Sort(ratios)
			mb := float64(size) * float64(b.N) / 1e6
			b.ReportMetric(mb/tPq.Seconds(), "parquet-MB/s")
			b.ReportMetric(mb/tPlain.Seconds(), "plain-MB/s")
			b.ReportMetric(mb/tRaw.Seconds(), "store-raw-MB/s")
			b.ReportMetric(tPlain.Seconds()/tPq.Seconds(), "ratio")
			b.ReportMetric(ratios[len(ratios)/2], "median-ratio")
		})
	}
}

// BenchmarkReadBack: MB/s of raw values read back (Get with checksum, the
// ledger's CRC, Parquet decode into Arrow batches).
func BenchmarkReadBack(b *testing.B) {
	parts := benchTables(b)
	size := 0
	for _, p := range parts {
		size += len(p) * len(p[0]) * 8
	}
	schema := int64Schema(benchNames)
	for _, comp := range benchCodecs {
		b.Run(string(comp), func(b *testing.B) {
			st := benchStore(b)
			var refs []FileRef
			for r, cols := range parts {
				var buf bytes.Buffer
				if err := encodeTable(&buf, benchNames, cols, encodeOptions{compression: comp}); err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("rb/p%d.parquet", r)
				if err := st.Put(context.Background(), name, buf.Bytes()); err != nil {
					b.Fatal(err)
				}
				refs = append(refs, FileRef{Name: name, Rows: int64(len(cols[0])), Bytes: int64(buf.Len()), CRC: crc32Of(buf.Bytes())})
			}
			alloc := memory.NewGoAllocator()
			b.SetBytes(int64(size))
			settle(b)
			for i := 0; i < b.N; i++ {
				for _, ref := range refs {
					data, err := st.Get(context.Background(), ref.Name)
					if err != nil {
						b.Fatal(err)
					}
					if crc32Of(data) != ref.CRC {
						b.Fatal("crc")
					}
					var sum int64
					if _, err := decodeTable(data, schema, alloc, func(rb arrow.RecordBatch) error {
						sum += rb.Column(1).(*array.Int64).Value(0)
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkUnitRerun runs keyed-count over 2M records (four map units of
// 500k records, two reduce units) and crashes one unit after it has done
// all its work but before the ledger has it (unit.after-write-before-ledger),
// so the first attempt and the re-run do the same work. It reports both
// durations, their ratio (target <= 1.5) and the whole finite job.
func BenchmarkUnitRerun(b *testing.B) {
	for _, kind := range []string{"map", "reduce"} {
		b.Run(kind, func(b *testing.B) {
			occ := 1
			if kind == "reduce" {
				occ = 5 // after the four map units
			}
			var first, rerun, jobMs, records float64
			for i := 0; i < b.N; i++ {
				sc := &scenario{job: "keyed-count", inputs: map[string]string{job.DefaultInput: "gen:records=2000000,keys=1000,seed=1"},
					mode: sink.Append, storage: "file://" + b.TempDir(), readBatch: DefaultReadBatchRows, plainAlloc: true, noOracle: true,
					fails: []fault.Spec{{Point: pointBeforeLedger, Occurrence: occ}}}
				o := sc.execute(b)
				if o.err != nil {
					b.Fatal(o.err)
				}
				type key struct {
					u UnitID
					a int
				}
				starts := map[key]time.Time{}
				var victim UnitID
				durs := map[int]time.Duration{}
				for _, ev := range o.trace {
					switch ev.Kind {
					case "start":
						starts[key{ev.Unit, ev.Attempt}] = ev.At
					case "interrupted":
						victim = ev.Unit
					}
				}
				n := 0
				for _, ev := range o.trace {
					if ev.Kind == "ended" && ev.Unit == victim {
						durs[n] = ev.At.Sub(starts[key{ev.Unit, ev.Attempt}])
						n++
					}
				}
				if n != 2 {
					b.Fatalf("victim %s ended %d times", victim, n)
				}
				first += float64(durs[0].Microseconds()) / 1000
				rerun += float64(durs[1].Microseconds()) / 1000
				jm := o.x.met.jobTable()[0]
				jobMs += jm.mapMs + jm.reduceMs + jm.commitMs
				records += float64(jm.recordsReread)
			}
			nf := float64(b.N)
			b.ReportMetric(first/nf, "first-ms")
			b.ReportMetric(rerun/nf, "rerun-ms")
			b.ReportMetric(rerun/first, "rerun/first")
			b.ReportMetric(jobMs/nf, "job-ms")
			b.ReportMetric(rerun/jobMs, "rerun/job")
			b.ReportMetric(records/nf, "records-reread")
		})
	}
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// BenchmarkEncode: MB/s of raw values encoded into memory (no disk), per
// encoder path, uncompressed: the CPU a materialisation spends before Put.
func BenchmarkEncode(b *testing.B) {
	parts := benchTables(b)
	size := 0
	for _, p := range parts {
		size += len(p) * len(p[0]) * 8
	}
	for _, enc := range encoders {
		b.Run(enc.String(), func(b *testing.B) {
			var buf bytes.Buffer
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, cols := range parts {
					buf.Reset()
					if err := encodeTable(&buf, benchNames, cols, encodeOptions{compression: CompressionNone, encoder: enc}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(buf.Len())/float64(size/len(parts)), "size-ratio")
		})
	}
}
