package recordwise

import (
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// The benchmarks run whole jobs; use -benchtime=1x (each iteration is one
// run) and -count for repetitions, e.g.
//
//	go test ./recordwise -run XXX -bench . -benchtime=1x
//
// Storage and output live on /dev/shm when it exists (see fastDir).

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkBackpressure throttles the tasks that write to the sink to a
// fraction of the source rate and reports, for aligned and unaligned
// barriers, the end-to-end duration of the periodic checkpoints and the
// in-flight data they persisted, as load approaches and passes capacity.
// load = (rows reaching each sink task per second) / (its capacity).
func BenchmarkBackpressure(b *testing.B) {
	const (
		rate     = 50000 // records/s in total
		duration = 3 * time.Second
		p        = 2
	)
	for _, load := range []float64{0.5, 0.8, 0.95, 1.0, 1.2, 1.5} {
		for _, barriers := range []string{"aligned", "unaligned"} {
			b.Run(fmt.Sprintf("load=%.2f/%s", load, barriers), func(b *testing.B) {
				var durs, inflight []float64
				for i := 0; i < b.N; i++ {
					records := int(rate * duration.Seconds())
					sc := &scenario{job: "keyed-count", barriers: barrierSetting{barriers, 0}, mode: sink.Idempotent,
						parallelism: p, interval: 100 * time.Millisecond,
						inputs: map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=1000,seed=1,rate=%d", records, rate)}}
					// About 90% of the records pass the filter; each sink task
					// gets half of them.
					sc.opts.SinkTaskRate = 0.9 * rate / p / load
					sc.plainAlloc, sc.measureOnly = true, true
					o := sc.executeRaw(b)
					if o.err != nil {
						b.Fatal(o.err)
					}
					for _, h := range o.report.History {
						if h.Status == "completed" && !h.Final {
							durs = append(durs, h.DurationMs)
							inflight = append(inflight, float64(h.InFlightBytes))
						}
					}
				}
				b.ReportMetric(percentile(durs, 0.5), "cp-p50-ms")
				b.ReportMetric(percentile(durs, 0.9), "cp-p90-ms")
				b.ReportMetric(percentile(inflight, 0.5), "inflight-p50-B")
				b.ReportMetric(float64(len(durs))/float64(b.N), "checkpoints")
			})
		}
	}
}

var flagTputRecords = flag.Int("rw.tput.records", 60_000_000, "records of BenchmarkThroughput's input")

// BenchmarkThroughput compares keyed-count throughput with a checkpoint
// every second and with periodic checkpoints off (only the final one), on
// -rw.tput.records generated records (several seconds, so several
// checkpoints). The
// transactional sink writes each output row once whatever the checkpoints
// do (one file per epoch), so the difference is the cost of checkpointing.
// Network buffers of 8192 rows keep the changelog the count emits per
// buffer small relative to the input.
func BenchmarkThroughput(b *testing.B) {
	for _, mode := range []string{"off", "1s"} {
		for _, barriers := range []string{"aligned", "unaligned"} {
			if mode == "off" && barriers == "unaligned" {
				continue
			}
			b.Run(fmt.Sprintf("checkpoints=%s/%s", mode, barriers), func(b *testing.B) {
				var rps, cps []float64
				for i := 0; i < b.N; i++ {
					sc := &scenario{job: "keyed-count", barriers: barrierSetting{barriers, 0}, mode: sink.Transactional,
						interval: time.Second,
						inputs:   map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=1000,seed=1", *flagTputRecords)}}
					sc.opts.NoPeriodicCheckpoints = mode == "off"
					sc.opts.BufferRows = 8192
					sc.opts.ReadRows = 8192
					sc.plainAlloc, sc.measureOnly = true, true
					o := sc.executeRaw(b)
					if o.err != nil {
						b.Fatal(o.err)
					}
					rps = append(rps, o.summary.ThroughputRPS)
					cps = append(cps, float64(o.summary.Checkpoints.Completed))
				}
				b.ReportMetric(percentile(rps, 0.5), "records/s")
				b.ReportMetric(percentile(cps, 0.5), "checkpoints")
			})
		}
	}
}

// wakeGauge measures how late a goroutine asking to sleep 1 ms wakes up,
// while a run goes on beside it: the scheduling noise every timer-driven
// flush and every wake-up of a task pays on this machine (Go rounds a
// sub-millisecond poll timeout up to 1 ms on Linux, and other processes
// take the cores). It costs about a thousand wake-ups a second.
type wakeGauge struct {
	stop chan struct{}
	done chan []float64
}

func startWakeGauge() *wakeGauge {
	g := &wakeGauge{stop: make(chan struct{}), done: make(chan []float64)}
	go func() {
		var late []float64
		for {
			select {
			case <-g.stop:
				g.done <- late
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			late = append(late, float64(time.Since(t0)-time.Millisecond)/1e6)
		}
	}()
	return g
}

// p99 stops the gauge and returns the 99th percentile of the lateness, ms.
func (g *wakeGauge) p99() float64 {
	close(g.stop)
	return percentile(<-g.done, 0.99)
}

// BenchmarkLatency's defaults are `rewind run`'s; the flags take one
// difference back at a time, to see which one moves the figure.
var (
	flagLatencyKeys   = flag.Int("rw.latency.keys", 100_000, "keys of BenchmarkLatency's input")
	flagLatencyFormat = flag.String("rw.latency.format", "parquet", "BenchmarkLatency's output format")
	flagLatencyRAM    = flag.Bool("rw.latency.ram", false, "put BenchmarkLatency's output and storage on a RAM disk (fastDir)")
)

// BenchmarkLatency paces the input at 100k records/s and reports end-to-end
// latency (hand-over at the source to visible at the sink) with a 1 ms
// buffer timeout, and beside it the p99 lateness of a 1 ms sleep during the
// run (wake-late-p99-ms): the tail of the latency follows it.
//
// It runs what `rewind run` runs by default, so its figure is the one a
// user gets (docs/benchmarks.md, "Latency through the CLI"): 100 k keys in
// 2 partitions, Parquet output, output and storage on the temp dir's disk
// rather than a RAM disk. With 1,000 keys (as it had) keyed-count folds
// each buffer's changes into at most 1,000 rows, so the sink writes a
// fraction of what it writes at 100 k keys, where nearly every record
// changes a key of its own and becomes an output row.
func BenchmarkLatency(b *testing.B) {
	for _, j := range []string{"keyed-count", "etl"} {
		for _, mode := range []sink.Mode{sink.Append, sink.Idempotent} {
			b.Run(fmt.Sprintf("%s/%s", j, mode), func(b *testing.B) {
				var p50, p99, h99, w99 []float64
				for i := 0; i < b.N; i++ {
					dir := b.TempDir()
					if *flagLatencyRAM {
						dir = fastDir(b)
					}
					sc := &scenario{job: j, mode: mode, interval: time.Second, format: sink.Format(*flagLatencyFormat),
						storage: "file://" + filepath.Join(dir, "storage"), output: filepath.Join(dir, "out"),
						inputs: map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=300000,keys=%d,partitions=2,seed=1,rate=100000", *flagLatencyKeys)}}
					sc.plainAlloc, sc.measureOnly = true, true
					g := startWakeGauge()
					o := sc.executeRaw(b)
					w99 = append(w99, g.p99())
					if o.err != nil {
						b.Fatal(o.err)
					}
					if l := o.summary.LatencyMs; l != nil {
						p50 = append(p50, l.P50)
						p99 = append(p99, l.P99)
					}
					if l := o.report.HandOverMs; l != nil {
						h99 = append(h99, l.P99)
					}
				}
				b.ReportMetric(percentile(p50, 0.5), "p50-ms")
				b.ReportMetric(percentile(p99, 0.5), "p99-ms")
				b.ReportMetric(percentile(h99, 0.5), "handover-p99-ms")
				b.ReportMetric(percentile(w99, 0.5), "wake-late-p99-ms")
			})
		}
	}
}
