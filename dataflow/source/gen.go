package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Generator defaults, used for every parameter a gen: spec leaves out.
const (
	DefaultGenRecords    = 1_000_000
	DefaultGenKeys       = 1000
	DefaultGenPartitions = 4
)

// Limits that keep a generator spec sane: partition names and per-partition
// state are allocated up front, and a skewed key distribution keeps a table
// of one threshold per key.
const (
	maxGenPartitions = 1 << 16
	maxSkewedKeys    = 1 << 22
	// maxDisorder keeps D+1 within 32 bits: the jitter is drawn from half of
	// a 64-bit random word.
	maxDisorder = 1<<31 - 1
)

var genParamNames = []string{"records", "keys", "partitions", "rate", "seed", "skew", "disorder"}

// genConfig is a parsed generator spec. It is immutable once built and
// shared by every reader of the source.
type genConfig struct {
	records  int64 // 0 = endless
	keys     int64
	parts    int64
	rate     int64 // records/s across all partitions; 0 = unpaced
	seed     int64
	skew     float64
	disorder int64

	partSeed []uint64   // per-partition stream origin, derived from seed
	zipf     *zipfTable // nil for uniform keys
}

// parseGenConfig parses the body of a gen: (or generated push:) spec.
// allowed lists the parameter names this form accepts; defParts is the
// partition count when the spec does not set one.
func parseGenConfig(kind, body string, allowed []string, defParts int64, opts Options) (*genConfig, error) {
	ps, err := parseParams(kind, body, allowed)
	if err != nil {
		return nil, err
	}
	c := &genConfig{
		records: DefaultGenRecords,
		keys:    DefaultGenKeys,
		parts:   defParts,
		seed:    opts.DefaultSeed,
	}
	for _, p := range ps {
		switch p.key {
		case "records":
			c.records, err = parseCount(kind, p)
		case "keys":
			c.keys, err = parseCount(kind, p)
			if err == nil && c.keys < 1 {
				err = fmt.Errorf("%s: keys=%s (want >= 1)", kind, p.val)
			}
		case "partitions":
			c.parts, err = parseCount(kind, p)
			if err == nil && (c.parts < 1 || c.parts > maxGenPartitions) {
				err = fmt.Errorf("%s: partitions=%s (want 1..%d)", kind, p.val, maxGenPartitions)
			}
		case "rate":
			c.rate, err = parseCount(kind, p)
		case "seed":
			c.seed, err = strconv.ParseInt(p.val, 10, 64)
			if err != nil {
				err = fmt.Errorf("%s: seed=%q is not an int64", kind, p.val)
			}
		case "skew":
			c.skew, err = strconv.ParseFloat(p.val, 64)
			if err != nil || c.skew < 0 || math.IsInf(c.skew, 0) || math.IsNaN(c.skew) {
				err = fmt.Errorf("%s: skew=%q is not a number >= 0", kind, p.val)
			}
		case "disorder":
			c.disorder, err = parseCount(kind, p)
			if err == nil && c.disorder > maxDisorder {
				err = fmt.Errorf("%s: disorder=%s is too large (want <= %d ms)", kind, p.val, maxDisorder)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if c.skew > 0 && c.keys > maxSkewedKeys {
		return nil, fmt.Errorf("%s: keys=%d with skew>0: at most %d keys are supported with a skewed distribution", kind, c.keys, maxSkewedKeys)
	}
	c.init()
	return c, nil
}

// init derives the per-partition seeds and the skew table.
func (c *genConfig) init() {
	root := mix64(uint64(c.seed) ^ 0x6a09e667f3bcc909)
	c.partSeed = make([]uint64, c.parts)
	for p := range c.partSeed {
		c.partSeed[p] = mix64(root + uint64(p+1)*weyl)
	}
	if c.skew > 0 && c.keys > 1 {
		c.zipf = newZipfTable(c.keys, c.skew)
	}
}

// count returns the number of records in partition p of a bounded
// generator: the ids below records that are congruent to p.
func (c *genConfig) count(p int64) int64 {
	if p >= c.records {
		return 0
	}
	return (c.records - p + c.parts - 1) / c.parts
}

// zipfTable draws keys from a discrete Zipf distribution over [0,k):
// P(key=i) ∝ 1/(i+1)^z, so key 0 is the most frequent. It is an inverse-CDF
// table: thresh[i] is CDF(i)·2^64, and a uniform 64-bit u maps to the key
// whose CDF interval contains u. The exact discrete law is used rather than
// a closed-form continuous approximation, which is poor for the first few
// keys, the very ones a skew experiment is about.
//
// A plain binary search over k thresholds costs log2(k) dependent,
// cache-missing loads per record. The guide table (Chen and Asau's method)
// cuts that to about one: guide[g] is the key that holds the smallest u of
// bucket g (u's top bits), so a draw only searches between guide[g] and
// guide[g+1], which for most buckets is one key or two.
type zipfTable struct {
	thresh []uint64 // k-1 entries; the last key takes the rest of the range
	guide  []uint32 // 2^bits+1 entries
	shift  uint     // 64 - bits
}

func newZipfTable(k int64, z float64) *zipfTable {
	w := make([]float64, k)
	var total float64
	// Summed from the smallest weight up, so small terms are not lost to
	// rounding against a large running sum.
	for i := k - 1; i >= 0; i-- {
		w[i] = math.Pow(float64(i+1), -z)
		total += w[i]
	}
	t := &zipfTable{thresh: make([]uint64, k-1)}
	var cum float64
	for i := range t.thresh {
		cum += w[i]
		f := math.Ldexp(cum/total, 64)
		if f >= math.Ldexp(1, 64) {
			t.thresh[i] = math.MaxUint64
		} else {
			t.thresh[i] = uint64(f)
		}
	}
	nb := uint(bits.Len64(uint64(k))) // at least k buckets
	t.shift = 64 - nb
	t.guide = make([]uint32, 1<<nb+1)
	for g := range t.guide[:1<<nb] {
		t.guide[g] = uint32(searchThreshold(t.thresh, uint64(g)<<t.shift))
	}
	t.guide[1<<nb] = uint32(k - 1)
	return t
}

// key maps a uniform 64-bit u to its key.
func (t *zipfTable) key(u uint64) uint64 {
	g := u >> t.shift
	lo, hi := uint64(t.guide[g]), uint64(t.guide[g+1])
	return lo + searchThreshold(t.thresh[lo:hi], u)
}

// searchThreshold returns the number of thresholds <= u (t is sorted).
func searchThreshold(t []uint64, u uint64) uint64 {
	lo, hi := 0, len(t)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t[m] <= u {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return uint64(lo)
}

// The generator is counter-based: every record is a pure function of
// (seed, partition, sequence number). Record s of partition p uses outputs
// 2s+1 and 2s+2 of a wyrand-style stream (a Weyl sequence, each element
// mixed by one 64x64->128-bit multiply folded with xor) that starts at
// partSeed[p]. Reading from any position therefore costs nothing extra (no
// replay of the prefix) and yields exactly the suffix of a full read, which
// is what recovery needs from a re-readable input. One wide multiply per
// 64 random bits is what keeps generation at tens of millions of records
// per second on one core.
const (
	weyl  uint64 = 0xa0761d6478bd642f // stream increment (odd)
	weyl2 uint64 = 0x40ec3ac8f17ac85e // 2·weyl mod 2^64
	wyxor uint64 = 0xe7037ed1a0b428db
)

// wy is the output function of the stream: x is a Weyl-sequence element.
func wy(x uint64) uint64 {
	hi, lo := bits.Mul64(x, x^wyxor)
	return hi ^ lo
}

// mix64 is the splitmix64 finalizer, a bijective 64-bit mixer; it derives
// the per-partition stream origins from the seed.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below maps a uniform 64-bit value to [0,n) by taking the high word of the
// 128-bit product: unbiased enough for n far below 2^64 and free of division.
func below(u, n uint64) uint64 {
	hi, _ := bits.Mul64(u, n)
	return hi
}

// fill writes records s0, s0+1, ... of partition p into the four slices,
// which must have equal length. Columns:
//
//   - id = s·P + p, so ids are exactly 0..records-1 across partitions;
//   - key uniform in [0,keys) from the first random word, or Zipf with
//     exponent skew (key 0 most frequent) through the zipfTable;
//   - value uniform in [-10,90) from the high half of the second word, so
//     about 10% are negative;
//   - ts = s + D - j with j uniform in [0,D] (D = disorder) from the low
//     half of the second word: partition time advances 1 ms per record and
//     a record is at most D ms early. Then ts(s) >= s >= ts(s') - D for
//     every s' <= s, i.e. within a partition every ts is at least the
//     running maximum minus D, so a window operator allowing D ms of
//     disorder never sees a late row.
func (c *genConfig) fill(p int64, s0 int64, id, key, value, ts []int64) {
	n := len(id)
	if n == 0 {
		return
	}
	key, value, ts = key[:n], value[:n], ts[:n]
	P := uint64(c.parts)
	K := uint64(c.keys)
	D1 := uint64(c.disorder) + 1
	D := int64(c.disorder)
	x := c.partSeed[p] + uint64(s0)*weyl2
	sid := int64(uint64(s0)*P + uint64(p))
	s := s0
	if c.zipf == nil {
		for i := range id {
			a := wy(x + weyl)
			b := wy(x + weyl2)
			x += weyl2
			id[i] = sid
			key[i] = int64(below(a, K))
			value[i] = int64((b>>32)*100>>32) - 10
			ts[i] = s + D - int64((b&0xffffffff)*D1>>32)
			sid += int64(P)
			s++
		}
		return
	}
	z := c.zipf
	for i := range id {
		a := wy(x + weyl)
		b := wy(x + weyl2)
		x += weyl2
		id[i] = sid
		key[i] = int64(z.key(a))
		value[i] = int64((b>>32)*100>>32) - 10
		ts[i] = s + D - int64((b&0xffffffff)*D1>>32)
		sid += int64(P)
		s++
	}
}

// genSource is the gen: source: a seeded, re-readable synthetic input.
type genSource struct {
	spec  string
	cfg   *genConfig
	names []string
	opts  Options
	start *anchorTime
	// bases[i] is where partition i was first opened (pacer.base); set
	// once, on its first Open.
	mu    sync.Mutex
	bases map[int]int64
}

func openGen(spec, body string, opts Options) (Source, error) {
	cfg, err := parseGenConfig("gen", body, genParamNames, DefaultGenPartitions, opts)
	if err != nil {
		return nil, err
	}
	names := make([]string, cfg.parts)
	for i := range names {
		names[i] = "p" + strconv.Itoa(i)
	}
	return &genSource{spec: spec, cfg: cfg, names: names, opts: opts, start: &anchorTime{now: opts.Now}, bases: map[int]int64{}}, nil
}

// Spec returns the text the source was opened from.
func (g *genSource) Spec() string { return g.spec }

// Partitions returns p0..p{P-1}.
func (g *genSource) Partitions() []string { return append([]string(nil), g.names...) }

// Rereadable is true: every record is a pure function of its position.
func (g *genSource) Rereadable() bool { return true }

// Bounded is true unless records=0 (endless).
func (g *genSource) Bounded() bool { return g.cfg.records > 0 }

// Records is the number of records a bounded generator yields over all its
// partitions; 0 (not known) for an endless one.
func (g *genSource) Records() int64 { return g.cfg.records }

// Close has nothing to release.
func (g *genSource) Close() error { return nil }

// Open opens partition i at pos; a bounded partition can be opened at any
// offset up to its record count (at the count it is immediately at EOF).
func (g *genSource) Open(ctx context.Context, i int, pos Position, alloc memory.Allocator) (Reader, error) {
	name, err := checkOpenPos("gen", g.names, i, pos)
	if err != nil {
		return nil, err
	}
	end := int64(math.MaxInt64)
	if g.cfg.records > 0 {
		end = g.cfg.count(int64(i))
		if pos.Offset > end {
			return nil, fmt.Errorf("gen: partition %q: position %d is beyond the end (%d records)", name, pos.Offset, end)
		}
	}
	r := &genReader{cfg: g.cfg, p: int64(i), name: name, s: pos.Offset, end: end, alloc: alloc}
	if g.cfg.rate > 0 {
		r.pace = &pacer{rate: uint64(g.cfg.rate), parts: uint64(g.cfg.parts), base: g.base(i, pos.Offset), now: g.opts.Now, sleep: g.opts.Sleep, start: g.start.at}
		// Fix the anchor now, so the schedule starts when reading starts.
		g.start.at()
	}
	return r, nil
}

// genReader reads one generator partition.
type genReader struct {
	cfg    *genConfig
	p      int64
	name   string
	s      int64 // next record number
	end    int64 // records in the partition (MaxInt64 when endless)
	alloc  memory.Allocator
	pace   *pacer
	closed bool
}

// Next generates the next batch of at most max records; with a rate it
// waits until they are due.
func (r *genReader) Next(ctx context.Context, max int) (arrow.RecordBatch, Position, error) {
	pos := Position{Partition: r.name, Offset: r.s}
	if r.closed {
		return nil, pos, errors.New("gen: Next on a closed reader")
	}
	if err := checkMax("gen", max); err != nil {
		return nil, pos, err
	}
	if err := ctx.Err(); err != nil {
		return nil, pos, err
	}
	n := min(int64(max), r.end-r.s)
	if n <= 0 {
		return nil, pos, io.EOF
	}
	if r.pace != nil {
		var err error
		if n, err = r.pace.take(ctx, r.s, n); err != nil {
			return nil, pos, err
		}
	}
	c := newCols(r.alloc, int(n))
	r.cfg.fill(r.p, r.s, c.id, c.key, c.value, c.ts)
	r.s += n
	return c.finish(), Position{Partition: r.name, Offset: r.s}, nil
}

// Lost is always 0: nothing is ever lost from a generator.
func (r *genReader) Lost() int64 { return 0 }

// Close marks the reader closed; it holds no resources.
func (r *genReader) Close() error { r.closed = true; return nil }
