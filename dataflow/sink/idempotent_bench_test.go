package sink

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkIdempotentFlush measures what the executors ask of the
// idempotent store: `writers` sink subtasks, each flushing `rows` rows of
// random keys out of `keys` at once, into a store already holding every
// key (the state of a keyed job that has run for a while). One operation
// is one round of flushes, one per writer, started together. Flush
// latency is reported as p50/p99 (what a row waits for after
// its hand-over, or a micro-batch's sink step), rows/s the upsert rate.
//
// Reproduce: go test -run '^$' -bench BenchmarkIdempotentFlush -benchtime 200x ./dataflow/sink/
func BenchmarkIdempotentFlush(b *testing.B) {
	layout := testLayout()
	for _, keys := range []int{100_000, 1_000_000, 4_000_000} {
		for _, rows := range []int{100, 5_000} {
			b.Run(fmt.Sprintf("keys=%d/rows=%d/writers=2", keys, rows), func(b *testing.B) {
				benchIdempotentFlush(b, layout, keys, rows, 2)
			})
		}
	}
}

func benchIdempotentFlush(b *testing.B, layout Layout, keys, rows, writers int) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	s := openSink(b, b.TempDir(), Idempotent, Parquet, layout, mem)
	defer s.Close()
	ws := make([]Writer, writers)
	for i := range ws {
		w, err := s.Writer(i, 0)
		must(b, err, "writer")
		defer w.Close()
		ws[i] = w
	}
	// Fill the store with every key in large flushes.
	const fill = 1 << 17
	for lo := 0; lo < keys; lo += fill {
		part := make([][]int64, 0, fill)
		for k := lo; k < min(lo+fill, keys); k++ {
			part = append(part, []int64{int64(k % 1000), int64(k / 1000), 0, int64(k)})
		}
		write(b, mem, ws[0], layout, 0, part)
		must(b, ws[0].Flush(0), "fill flush")
	}
	r := rand.New(rand.NewPCG(uint64(keys), uint64(rows)))
	round := func(v int64) [][][]int64 {
		out := make([][][]int64, writers)
		for i := range out {
			out[i] = make([][]int64, rows)
			for j := range out[i] {
				k := r.IntN(keys)
				out[i][j] = []int64{int64(k % 1000), int64(k / 1000), v, r.Int64N(1 << 40)}
			}
		}
		return out
	}
	var lats []time.Duration
	var mu sync.Mutex
	v := int64(1)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		in := round(v)
		b.StartTimer()
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() {
				t0 := time.Now()
				write(b, mem, w, layout, v, in[i])
				if err := w.Flush(v); err != nil {
					b.Error(err)
				}
				d := time.Since(t0)
				mu.Lock()
				lats = append(lats, d)
				mu.Unlock()
			})
		}
		wg.Wait()
		v++
	}
	slices.Sort(lats)
	ms := func(q float64) float64 { return float64(lats[int(q*float64(len(lats)-1))].Microseconds()) / 1000 }
	b.ReportMetric(ms(0.5), "p50_ms")
	b.ReportMetric(ms(0.99), "p99_ms")
	b.ReportMetric(float64(len(lats)*rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkIdempotentApply measures the applier alone: one run of `rows`
// random rows added to a store already holding `keys` keys (what the
// applier does with the frames gathered while the previous run was
// written), and the merges that run makes due, which the merger does in
// the background: their cost is paid per row in the end.
//
// Reproduce: go test -run '^$' -bench BenchmarkIdempotentApply -benchtime 5x ./dataflow/sink/
func BenchmarkIdempotentApply(b *testing.B) {
	layout := testLayout()
	for _, keys := range []int{100_000, 4_000_000} {
		for _, rows := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("keys=%d/rows=%d", keys, rows), func(b *testing.B) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(b, 0)
				s := openSink(b, b.TempDir(), Idempotent, Parquet, layout, mem)
				defer s.Close()
				is := s.(*idempotentSink)
				is.ap.halt() // the benchmark applies and merges by hand
				is.st.stopMerger()
				merge := func() {
					for {
						did, err := is.st.mergeOnce(nil)
						must(b, err, "merge")
						if !did {
							return
						}
					}
				}
				w, err := s.Writer(0, 0)
				must(b, err, "writer")
				defer w.Close()
				iw := w.(*idempotentWriter)
				seq := int64(0)
				chunk := func(rs [][]int64) logChunk {
					seq++
					frame := iw.encode([][][]int64{transpose(rs)})
					return logChunk{seq: seq, rows: frame[idemFrameHdrLen:]}
				}
				const fill = 1 << 18
				for lo := 0; lo < keys; lo += fill {
					part := make([][]int64, 0, fill)
					for k := lo; k < min(lo+fill, keys); k++ {
						part = append(part, []int64{int64(k % 1000), int64(k / 1000), 0, int64(k)})
					}
					must(b, is.applyChunks([]logChunk{chunk(part)}), "fill")
					merge()
				}
				r := rand.New(rand.NewPCG(uint64(keys), uint64(rows)))
				v := int64(1)
				for b.Loop() {
					b.StopTimer()
					in := make([][]int64, rows)
					for j := range in {
						k := r.IntN(keys)
						in[j] = []int64{int64(k % 1000), int64(k / 1000), v, r.Int64N(1 << 40)}
					}
					c := chunk(in)
					b.StartTimer()
					must(b, is.applyChunks([]logChunk{c}), "apply")
					merge() // what the merger does in the background, charged here
					v++
				}
				b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

func transpose(rows [][]int64) [][]int64 {
	cols := make([][]int64, len(rows[0]))
	for i := range cols {
		cols[i] = make([]int64, len(rows))
		for r, row := range rows {
			cols[i][r] = row[i]
		}
	}
	return cols
}
