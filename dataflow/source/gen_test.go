package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestOpenSpecErrors(t *testing.T) {
	cases := []struct {
		spec    string
		phrases []string
	}{
		{"", []string{"missing kind prefix", "gen:", "file:", "push:"}},
		{"gen", []string{"missing kind prefix"}},
		{"kafka:topic=x", []string{`unknown kind "kafka"`, "allowed: gen, file, push"}},
		{"gen:recs=10", []string{`gen: unknown parameter "recs"`, "allowed: records, keys, partitions, rate, seed, skew, disorder"}},
		{"gen:records", []string{`malformed parameter "records"`, "name=value"}},
		{"gen:records=-1", []string{"records=-1 is negative"}},
		{"gen:records=abc", []string{`records="abc" is not an integer`}},
		{"gen:records=1.5", []string{`records="1.5" is not an integer`}},
		{"gen:keys=0", []string{"keys=0 (want >= 1)"}},
		{"gen:partitions=0", []string{"partitions=0 (want 1..65536)"}},
		{"gen:seed=x", []string{`seed="x" is not an int64`}},
		{"gen:skew=-1", []string{`skew="-1" is not a number >= 0`}},
		{"gen:skew=NaN", []string{`skew="NaN"`}},
		{"gen:records=5,records=6", []string{`parameter "records" given twice`}},
		{"gen:keys=100000000,skew=1", []string{"at most 4194304 keys"}},
		{"file:", []string{"empty path"}},
		{"push:partitions=2", []string{`push: unknown parameter "partitions"`, "allowed: listen, records, keys, seed, rate, skew, disorder"}},
		{"push:listen=127.0.0.1:0,records=5", []string{"cannot be combined"}},
		{"push:listen=0.0.0.0:0", []string{"non-loopback", "127.0.0.1:PORT"}},
		{"push:listen=:0", []string{"non-loopback"}},
		{"push:listen=example.com:80", []string{"non-loopback"}},
		{"push:listen=127.0.0.1", []string{"not host:port"}},
	}
	for _, c := range cases {
		src, err := Open(c.spec, Options{})
		if err == nil {
			src.Close()
			t.Errorf("Open(%q): no error", c.spec)
			continue
		}
		for _, p := range c.phrases {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("Open(%q) = %q, want it to contain %q", c.spec, err, p)
			}
		}
	}
}

func TestGenDefaults(t *testing.T) {
	src := mustOpen(t, "gen:", Options{DefaultSeed: 7})
	defer src.Close()
	g := src.(*genSource)
	if g.cfg.records != 1_000_000 || g.cfg.keys != 1000 || g.cfg.parts != 4 || g.cfg.rate != 0 ||
		g.cfg.seed != 7 || g.cfg.skew != 0 || g.cfg.disorder != 0 {
		t.Fatalf("defaults: %+v", g.cfg)
	}
	if !src.Rereadable() || !src.Bounded() {
		t.Fatal("gen must be re-readable and bounded")
	}
	if got := src.Partitions(); !slices.Equal(got, []string{"p0", "p1", "p2", "p3"}) {
		t.Fatalf("partitions %v", got)
	}
	if src.Spec() != "gen:" {
		t.Fatalf("spec %q", src.Spec())
	}
	src2 := mustOpen(t, "gen:records=1e6,keys=1000,partitions=4,rate=0,seed=7,skew=0,disorder=0", Options{})
	if src2.(*genSource).cfg.records != 1_000_000 {
		t.Fatal("1e6 not accepted as a count")
	}
}

// readGen reads every partition of a generator source fully.
func readGen(t *testing.T, src Source, mem memory.Allocator, max int) [][]row {
	t.Helper()
	var out [][]row
	for i := range src.Partitions() {
		out = append(out, openRead(t, src, mem, i, 0, max))
	}
	return out
}

func TestGenDeterminism(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const spec = "gen:records=50000,keys=300,partitions=3,seed=42,skew=0.8,disorder=25"
	a := readGen(t, mustOpen(t, spec, Options{}), mem, 1000)
	b := readGen(t, mustOpen(t, spec, Options{DefaultSeed: 99}), mem, 777)
	if !slices.EqualFunc(a, b, slices.Equal) {
		t.Fatal("same seed, different batch sizes: different records")
	}
	// The default seed applies when the spec has none.
	c := readGen(t, mustOpen(t, "gen:records=50000,keys=300,partitions=3,skew=0.8,disorder=25", Options{DefaultSeed: 42}), mem, 4096)
	if !slices.EqualFunc(a, c, slices.Equal) {
		t.Fatal("DefaultSeed=42 differs from seed=42")
	}
	d := readGen(t, mustOpen(t, "gen:records=50000,keys=300,partitions=3,seed=43,skew=0.8,disorder=25", Options{}), mem, 1000)
	same := 0
	for p := range a {
		for i := range a[p] {
			if a[p][i] == d[p][i] {
				same++
			}
		}
	}
	// ids always agree; with a different seed whole rows should almost never do.
	if same > 500 {
		t.Fatalf("seed 42 and 43 agree on %d of 50000 rows", same)
	}
}

func TestGenSuffixAndShape(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)

	const N, K, P, D = 40_001, 500, 5, 37
	spec := fmt.Sprintf("gen:records=%d,keys=%d,partitions=%d,seed=%d,disorder=%d", N, K, P, rng.Int64(), D)
	src := mustOpen(t, spec, Options{})
	defer src.Close()
	full := readGen(t, src, mem, 1024)

	seen := make([]bool, N)
	neg, total := 0, 0
	for p, rows := range full {
		if want := src.(*genSource).cfg.count(int64(p)); int64(len(rows)) != want {
			t.Fatalf("seed=%d: partition %d has %d rows, want %d", seed, p, len(rows), want)
		}
		maxTS := int64(-1 << 62)
		for s, r := range rows {
			id, key, val, ts := r[0], r[1], r[2], r[3]
			if id != int64(s*P+p) {
				t.Fatalf("seed=%d: p%d record %d has id %d", seed, p, s, id)
			}
			if id < 0 || id >= N || seen[id] {
				t.Fatalf("seed=%d: id %d out of range or repeated", seed, id)
			}
			seen[id] = true
			if key < 0 || key >= K {
				t.Fatalf("seed=%d: key %d outside [0,%d)", seed, key, K)
			}
			if val < -10 || val >= 90 {
				t.Fatalf("seed=%d: value %d outside [-10,90)", seed, val)
			}
			if ts < int64(s) || ts > int64(s)+D {
				t.Fatalf("seed=%d: p%d record %d ts %d outside [s, s+D]", seed, p, s, ts)
			}
			if ts < maxTS-D {
				t.Fatalf("seed=%d: p%d record %d ts %d is later than running max %d - disorder %d", seed, p, s, ts, maxTS, D)
			}
			maxTS = max(maxTS, ts)
			if val < 0 {
				neg++
			}
			total++
		}
	}
	for id, ok := range seen {
		if !ok {
			t.Fatalf("seed=%d: id %d missing", seed, id)
		}
	}
	if f := float64(neg) / float64(total); f < 0.085 || f > 0.115 {
		t.Fatalf("seed=%d: %.3f of values negative, want about 0.10", seed, f)
	}

	// Reading from a random position equals the suffix of the full read.
	for k := 0; k < 40; k++ {
		p := rng.IntN(P)
		off := rng.Int64N(int64(len(full[p])) + 1)
		max := 1 + rng.IntN(3000)
		got := openRead(t, src, mem, p, off, max)
		if !slices.Equal(got, full[p][off:]) {
			t.Fatalf("seed=%d: p%d from %d (max %d): not the suffix of the full read", seed, p, off, max)
		}
	}
}

func TestGenSkew(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	const seed = 1234
	t.Logf("seed=%d", seed)
	count := func(spec string) []int {
		src := mustOpen(t, spec, Options{DefaultSeed: seed})
		defer src.Close()
		n := make([]int, 100)
		for _, rows := range readGen(t, src, mem, 4096) {
			for _, r := range rows {
				n[r[1]]++
			}
		}
		return n
	}
	z := count("gen:records=100000,keys=100,skew=1.2")
	for k := 1; k < 100; k++ {
		if z[k] >= z[0] {
			t.Fatalf("seed=%d: skew=1.2: key %d (%d) as frequent as key 0 (%d)", seed, k, z[k], z[0])
		}
	}
	// P(0)/P(1) = 2^1.2 ≈ 2.30 for the exact discrete Zipf law.
	if r := float64(z[0]) / float64(z[1]); r < 2.1 || r > 2.5 {
		t.Fatalf("seed=%d: key0/key1 = %.2f, want about 2.30", seed, r)
	}
	u := count("gen:records=100000,keys=100")
	for k, n := range u {
		if n < 800 || n > 1200 {
			t.Fatalf("seed=%d: uniform keys: key %d drawn %d times, want about 1000", seed, k, n)
		}
	}
}

func TestGenOpenErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := mustOpen(t, "gen:records=10,partitions=3", Options{})
	ctx := context.Background()
	_, err := src.Open(ctx, 0, Position{Partition: "p0", Offset: 5}, mem)
	wantErr(t, err, "beyond the end", "4 records")
	_, err = src.Open(ctx, 1, Position{Partition: "p0", Offset: 0}, mem)
	wantErr(t, err, `names partition "p0"`, `partition 1 is "p1"`)
	_, err = src.Open(ctx, 3, Position{Partition: "p3"}, mem)
	wantErr(t, err, "out of range")
	_, err = src.Open(ctx, 0, Position{Partition: "p0", Offset: -1}, mem)
	wantErr(t, err, "negative position")
	// The zero position means the start.
	r, err := src.Open(ctx, 2, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = r.Next(ctx, 0)
	wantErr(t, err, "max=0")
	rows, _ := readAll(t, r, 0, 100)
	if len(rows) != 3 || rows[0][0] != 2 || rows[2][0] != 8 {
		t.Fatalf("p2 of 10 records over 3 partitions: %v", rows)
	}
	r.Close()
	_, _, err = r.Next(ctx, 1)
	wantErr(t, err, "closed reader")
	// At the end: immediately EOF, at the same position.
	r, err = src.Open(ctx, 0, Position{Partition: "p0", Offset: 4}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, pos, err := r.Next(ctx, 10); !errors.Is(err, io.EOF) || b != nil || pos.Offset != 4 {
		t.Fatalf("at end: %v %v %v", b, pos, err)
	}
}

func TestGenEndless(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	src := mustOpen(t, "gen:records=0,partitions=2", Options{})
	defer src.Close()
	if src.Bounded() {
		t.Fatal("records=0 must be unbounded")
	}
	r, err := src.Open(context.Background(), 1, Position{Partition: "p1", Offset: 1 << 40}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 3; i++ {
		b, pos, err := r.Next(context.Background(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if b.NumRows() != 1000 || pos.Offset != 1<<40+int64(i+1)*1000 {
			t.Fatalf("batch %d rows at %v", b.NumRows(), pos)
		}
		b.Release()
	}
}

func TestGenPacing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()

	// 100k records at 50k/s over 4 partitions, read round-robin: the fake
	// clock must advance by about N/R = 2 s.
	clk := newFakeClock()
	start := clk.Now()
	src := mustOpen(t, "gen:records=100000,partitions=4,rate=50000", clk.options(1))
	var rs []Reader
	for i := range src.Partitions() {
		r, err := src.Open(ctx, i, Position{}, mem)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rs = append(rs, r)
	}
	total := 0
	for live := len(rs); live > 0; {
		live = 0
		for _, r := range rs {
			b, _, err := r.Next(ctx, 4096)
			if errors.Is(err, io.EOF) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			live++
			total += int(b.NumRows())
			b.Release()
		}
	}
	if total != 100000 {
		t.Fatalf("read %d records", total)
	}
	if adv := clk.Now().Sub(start); adv < 1990*time.Millisecond || adv > 2010*time.Millisecond {
		t.Fatalf("fake clock advanced %v for 100000 records at 50000/s, want about 2s", adv)
	}

	// At a high rate a fast caller still gets full batches, not a record or
	// two per Next.
	clk = newFakeClock()
	start = clk.Now()
	src = mustOpen(t, "gen:records=100000,partitions=1,rate=10000000", clk.options(1))
	r, err := src.Open(ctx, 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for n := 0; n < 100000; n += 1000 {
		b, _, err := r.Next(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if b.NumRows() != 1000 {
			t.Fatalf("paced batch of %d rows, want 1000", b.NumRows())
		}
		b.Release()
	}
	if adv := clk.Now().Sub(start); adv != 10*time.Millisecond {
		t.Fatalf("fake clock advanced %v for 100000 records at 10M/s, want 10ms", adv)
	}

	// A reader opened later (after a crash) finds its backlog due at once:
	// the schedule is anchored at the first Open, not at each Open.
	clk = newFakeClock()
	src = mustOpen(t, "gen:records=0,partitions=1,rate=1000", clk.options(1))
	r1, err := src.Open(ctx, 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	r1.Close()
	clk.Sleep(ctx, time.Second) // one second of downtime
	sleeps := clk.sleeps
	r2, err := src.Open(ctx, 0, Position{}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	b, _, err := r2.Next(ctx, 5000)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumRows() != 1000 || clk.sleeps != sleeps {
		t.Fatalf("after 1s at 1000/s: batch of %d rows, %d sleeps; want 1000 rows at once", b.NumRows(), clk.sleeps-sleeps)
	}
	b.Release()

	// Pacing honours ctx.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := r2.Next(cctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestPacerMath(t *testing.T) {
	p := &pacer{rate: 3, parts: 2}
	// Per partition 1.5 records/s: record counts due at 0.66.., 1.33.., 2 s.
	for n, want := range []time.Duration{0, 666666667, 1333333334, 2 * time.Second} {
		if got := p.dueAt(int64(n)); got != want {
			t.Fatalf("dueAt(%d) = %v, want %v", n, got, want)
		}
		if got := p.dueCount(want); got != int64(n) {
			t.Fatalf("dueCount(%v) = %d, want %d", want, got, n)
		}
		if n > 0 {
			if got := p.dueCount(want - 1); got != int64(n-1) {
				t.Fatalf("dueCount(%v) = %d, want %d", want-1, got, n-1)
			}
		}
	}
	big := &pacer{rate: 1 << 62, parts: 1}
	if got := big.dueCount(time.Duration(1 << 62)); got <= 0 {
		t.Fatalf("overflowing dueCount = %d, want saturation", got)
	}
}

func TestParseInt64(t *testing.T) {
	good := map[string]int64{"0": 0, "-0": 0, "+7": 7, "-10": -10, "9223372036854775807": 1<<63 - 1, "-9223372036854775808": -1 << 63}
	for s, want := range good {
		if got, ok := parseInt64([]byte(s)); !ok || got != want {
			t.Errorf("parseInt64(%q) = %d, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "-", "+", "1.5", "1e3", "9223372036854775808", "-9223372036854775809", "12345678901234567890", "x", " 1"} {
		if _, ok := parseInt64([]byte(s)); ok {
			t.Errorf("parseInt64(%q) accepted", s)
		}
	}
}

// BenchmarkGen measures single-core generation through the Reader, i.e.
// including allocation and Arrow array construction.
func BenchmarkGen(b *testing.B) {
	for _, spec := range []string{
		"gen:records=0,partitions=1",
		"gen:records=0,partitions=1,keys=100000,disorder=50",
		"gen:records=0,partitions=1,keys=100000,skew=1.1,disorder=50",
	} {
		for _, batch := range []int{4096, 65536} {
			b.Run(fmt.Sprintf("%s/batch=%d", spec[4:], batch), func(b *testing.B) {
				src := mustOpen(b, spec, Options{DefaultSeed: 1})
				r, err := src.Open(context.Background(), 0, Position{}, memory.DefaultAllocator)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				ctx := context.Background()
				b.ResetTimer()
				cpu0 := cpuTime()
				n := 0
				for i := 0; i < b.N; i++ {
					rec, _, err := r.Next(ctx, batch)
					if err != nil {
						b.Fatal(err)
					}
					n += int(rec.NumRows())
					rec.Release()
				}
				b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Mrec/s")
				b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds()/1e6, "Mrec/cpu-s")
			})
		}
	}
}

// BenchmarkGenFill measures the record function alone into reused slices.
func BenchmarkGenFill(b *testing.B) {
	src := mustOpen(b, "gen:records=0,partitions=1,keys=100000,disorder=50", Options{DefaultSeed: 1})
	cfg := src.(*genSource).cfg
	const n = 4096
	var c [4][n]int64
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		cfg.fill(0, int64(i)*n, c[0][:], c[1][:], c[2][:], c[3][:])
	}
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds()/1e6, "Mrec/s")
	b.ReportMetric(float64(b.N)*n/(cpuTime()-cpu0).Seconds()/1e6, "Mrec/cpu-s")
}

// cpuTime is the process's user+system CPU time. Benchmarks report records
// per CPU-second next to records per wall-second because this machine is
// shared: wall time then measures the neighbours as much as the code. The
// CPU figure includes the garbage collector's threads, so it is not
// flattering either.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestZipfGuide checks the guide-table lookup against a plain binary search
// over the thresholds, at the edges of the range and at random draws.
func TestZipfGuide(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	for _, k := range []int64{2, 3, 7, 64, 1000, 65537} {
		for _, z := range []float64{0.3, 1, 2.5} {
			tab := newZipfTable(k, z)
			us := []uint64{0, 1, 1<<63 - 1, 1 << 63, ^uint64(0), ^uint64(0) - 1}
			for _, th := range tab.thresh[:min(len(tab.thresh), 50)] {
				us = append(us, th-1, th, th+1)
			}
			for i := 0; i < 20000; i++ {
				us = append(us, rng.Uint64())
			}
			for _, u := range us {
				want := searchThreshold(tab.thresh, u)
				if got := tab.key(u); got != want || got >= uint64(k) {
					t.Fatalf("seed=%d: k=%d z=%g u=%#x: key %d, want %d", seed, k, z, u, got, want)
				}
			}
		}
	}
}

// A process that resumes a run opens its partitions where the recovery
// point left them: the feed goes on from there at the rate, instead of
// idling as if it had to produce the records before that position again
// (a resumed README example once took 10.2 s where about 7 s was due).
func TestGenPacingStartsAtTheFirstOpenedPosition(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	clk := newFakeClock()
	start := clk.Now()
	// 2 partitions at 1000/s in total: 500/s each. The resumed process
	// opens them at 3000 and 2990 and reads 1000 records from each.
	src := mustOpen(t, "gen:records=0,partitions=2,rate=1000", clk.options(1))
	var rs []Reader
	for i, off := range []int64{3000, 2990} {
		r, err := src.Open(ctx, i, Position{Partition: src.Partitions()[i], Offset: off}, mem)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rs = append(rs, r)
	}
	for _, r := range rs {
		for n := 0; n < 1000; {
			b, _, err := r.Next(ctx, 1000-n)
			if err != nil {
				t.Fatal(err)
			}
			n += int(b.NumRows())
			b.Release()
		}
	}
	if adv := clk.Now().Sub(start); adv < 1990*time.Millisecond || adv > 2010*time.Millisecond {
		t.Fatalf("fake clock advanced %v for 1000 records per partition at 500/s each, want about 2s (not the 6s of positions 0..3000)", adv)
	}
	// Reopened below where it started (a restore to an older recovery
	// point), a partition finds those records due at once.
	sleeps := clk.sleeps
	r, err := src.Open(ctx, 0, Position{Partition: "p0", Offset: 2000}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, _, err := r.Next(ctx, 1500)
	if err != nil {
		t.Fatal(err)
	}
	if b.NumRows() != 1500 || clk.sleeps != sleeps {
		t.Fatalf("reopened at 2000: batch of %d rows after %d sleeps; want 1500 at once", b.NumRows(), clk.sleeps-sleeps)
	}
	b.Release()
}
