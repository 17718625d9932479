package microbatch

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
)

var (
	flagSchedules = flag.Int("mb.schedules", 200, "number of seeded random crash schedules in TestRandomCrashSchedules")
	flagSeed      = flag.Int64("mb.seed", 0, "run only this seed of TestRandomCrashSchedules (0: all)")
	flagDisk      = flag.Bool("mb.disk", false, "put test storage and outputs on the default temp dir even when a RAM disk exists")
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines leaked after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fastDir returns a fresh directory for storage or output. Every Put and
// sink flush fsyncs; on this project's CI disk that costs milliseconds, so
// the suite uses a RAM-backed directory when there is one. Crash semantics
// do not depend on the medium: a crash here is the loss of memory, not of
// the machine.
func fastDir(t testing.TB) string {
	t.Helper()
	if !*flagDisk {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			if d, err := os.MkdirTemp("/dev/shm", "rewind-mb-"); err == nil {
				t.Cleanup(func() { _ = os.RemoveAll(d) })
				return d
			}
		}
	}
	return t.TempDir()
}

// defaultInputs are small inputs per job, so the whole matrix stays fast.
func defaultInputs(jobName string, records int, seed int64) map[string]string {
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=%d,keys=%d,seed=%d", records/2, records/4, seed),
			job.InputPayments: fmt.Sprintf("gen:records=%d,keys=%d,seed=%d", records/2, records/4, seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=%d,keys=200,seed=%d", records, seed)}
}

// scenario is one run of the executor against the oracle.
type scenario struct {
	job         string
	inputs      map[string]string
	mode        sink.Mode
	parallelism int
	fails       []fault.Spec
	opts        Options
	storage     string // URL; default: a fresh local directory
	output      string // default: a fresh directory
	params      *job.Params
	progress    io.Writer
	// ledger, when set, wraps the sink in a recordingSink (dedup drops
	// re-delivered batch ids).
	ledger *batchLedger
	dedup  bool
}

type outcome struct {
	summary *run.Summary
	stats   sink.Stats
	table   *sink.Table
	want    *oracle.Result
	env     *run.Env
	faults  *fault.Injector
	err     error
}

func (sc *scenario) config(t testing.TB) run.Config {
	t.Helper()
	if sc.parallelism == 0 {
		sc.parallelism = 2
	}
	if sc.mode == "" {
		sc.mode = sink.Idempotent
	}
	if sc.storage == "" {
		sc.storage = "file://" + fastDir(t)
	}
	if sc.output == "" {
		sc.output = filepath.Join(fastDir(t), "out")
	}
	// Small event-time bounds, so windows fire and the join evicts state
	// in the middle of the run, not only at the end of the input.
	p := job.Params{Window: 50, JoinWindow: 200, MaxDisorder: 0}
	if sc.params != nil {
		p = *sc.params
	}
	return run.Config{
		Job: sc.job, Params: p, Executor: "microbatch", Inputs: sc.inputs, Output: sc.output,
		OutputFormat: sink.Parquet, SinkMode: sc.mode, Storage: sc.storage, Parallelism: sc.parallelism,
		Trigger: time.Millisecond, Fails: sc.fails, Seed: 1, Progress: sc.progress,
	}
}

// execute runs the scenario and resolves the output; it does not judge.
// The checked allocator must be back at zero when everything is closed.
func (sc *scenario) execute(t testing.TB) *outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := sc.config(t)
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env, err := run.Prepare(ctx, cfg, alloc, log, true, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if sc.ledger != nil {
		env.Sink = &recordingSink{Sink: env.Sink, ledger: sc.ledger, cols: sink.ColumnNames(env.Job.Output.Schema), dedup: sc.dedup}
	}
	o := &outcome{env: env, faults: env.Faults}
	o.summary, o.err = Executor{Options: sc.opts}.Run(ctx, env)
	if o.err == nil {
		if err := run.Finish(env, o.summary); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
	if err := env.Close(); err != nil {
		t.Fatalf("closing env: %v", err)
	}
	alloc.AssertSize(t, 0)
	if o.err != nil {
		return o
	}
	o.table, o.stats, err = sink.Resolve(cfg.Output, env.Job.Output)
	if err != nil {
		t.Fatalf("resolving output: %v", err)
	}
	o.want = oracleResult(t, cfg)
	return o
}

var oracleCache sync.Map // config key -> *oracle.Result

func oracleResult(t testing.TB, cfg run.Config) *oracle.Result {
	t.Helper()
	key := fmt.Sprintf("%s|%v|%v", cfg.Job, cfg.Params, cfg.Inputs)
	if r, ok := oracleCache.Load(key); ok {
		return r.(*oracle.Result)
	}
	j, err := job.Build(cfg.Job, cfg.Params)
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]source.Source{}
	for n, spec := range cfg.Inputs {
		s, err := source.Open(spec, source.Options{DefaultSeed: cfg.Seed})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srcs[n] = s
	}
	res, err := oracle.Evaluate(context.Background(), j, srcs, memory.NewGoAllocator())
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	oracleCache.Store(key, res)
	return res
}

// check judges an outcome: the resolved output equals the oracle's, the
// idempotent and transactional sinks show no duplicate, and the summary's
// duplicate count is what an independent reader counts.
func (o *outcome) check(t testing.TB, what string) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("%s: run failed: %v", what, o.err)
	}
	if d := o.table.Diff(o.want.Table, 10); d != "" {
		t.Fatalf("%s: resolved output differs from the oracle: %s", what, d)
	}
	mode := o.env.Config.SinkMode
	if mode != sink.Append && o.stats.DuplicateRows != 0 {
		t.Fatalf("%s: %s sink shows %d duplicate rows", what, mode, o.stats.DuplicateRows)
	}
	if o.summary.SinkDuplicateRows != o.stats.DuplicateRows {
		t.Fatalf("%s: summary reports %d duplicates, an independent read of the output counts %d", what, o.summary.SinkDuplicateRows, o.stats.DuplicateRows)
	}
	if n := independentDuplicates(t, o.env.Config.Output, o.env.Job.Output); n != o.stats.DuplicateRows {
		t.Fatalf("%s: summary reports %d duplicates, counting visible files one by one finds %d", what, o.stats.DuplicateRows, n)
	}
	if o.summary.LostRecords != 0 {
		t.Fatalf("%s: %d records lost from a re-readable source", what, o.summary.LostRecords)
	}
	if o.summary.LateRows != o.want.LateRows {
		t.Fatalf("%s: %d late rows, the oracle has %d", what, o.summary.LateRows, o.want.LateRows)
	}
}

// independentDuplicates counts extra copies of (write key, _version)
// among visible rows with its own Parquet reader, sharing no code with
// sink.Resolve.
func independentDuplicates(t testing.TB, dir string, layout sink.Layout) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var dups int64
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "_") || strings.HasPrefix(n, ".") || e.IsDir() {
			continue
		}
		if !strings.HasSuffix(n, ".parquet") {
			t.Fatalf("visible file %s is not Parquet", n)
		}
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		pf, err := parquet.OpenFile(f, fi.Size())
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		var want []int
		for _, k := range append(slices.Clone(layout.WriteKey), sink.VersionColumn) {
			idx := -1
			for i, path := range pf.Schema().Columns() {
				if len(path) == 1 && path[0] == k {
					idx = i
				}
			}
			if idx < 0 {
				t.Fatalf("%s has no column %s", n, k)
			}
			want = append(want, idx)
		}
		r := parquet.NewReader(pf)
		rows := make([]parquet.Row, 256)
		for {
			k, err := r.ReadRows(rows)
			for _, row := range rows[:k] {
				var b strings.Builder
				for _, ci := range want {
					for _, v := range row {
						if v.Column() == ci {
							fmt.Fprintf(&b, "%d,", v.Int64())
						}
					}
				}
				key := b.String()
				if seen[key] > 0 {
					dups++
				}
				seen[key]++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
		}
		_ = r.Close()
		_ = f.Close()
	}
	return dups
}
