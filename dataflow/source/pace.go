package source

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"
)

// paceQuantum is how much feed time a paced reader waits to accumulate
// before it returns a batch when nothing is due yet. Without it a fast
// caller at a high rate would get one-record batches and pay per-batch
// overhead for nothing; with it a batch holds at most 1 ms of records, so
// the added latency stays small.
const paceQuantum = time.Millisecond

// pacer makes one partition's records become available at a fixed rate on a
// schedule anchored at a shared start time: record s (0-based) of a
// partition is due ceil((s+1)·parts/rate) seconds after the start. Because
// the schedule is anchored and not relative to the last read, a reader that
// falls behind (or is reopened after a crash) finds the backlog due at once
// and catches up as fast as the caller can take it, like a real feed that
// kept producing while the job was down.
//
// The schedule of a partition counts from base, the position its first
// reader in this process opened at: a process resuming a run from a
// recovery point (rewind run --resume) starts the feed where the point
// left it, instead of idling for the time an earlier process spent reading
// the records before it. A reader reopened below base finds those records
// due at once.
type pacer struct {
	rate  uint64 // records per second across all partitions; > 0
	parts uint64 // partitions sharing the rate
	base  int64  // the partition's first position in this process
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
	start func() time.Time // the shared anchor, fixed on first use
}

// anchor returns a function that yields the time of its first call on every
// call: the schedule of all partitions of one source starts when the first
// reader is opened, not when the spec is parsed.
func anchor(now func() time.Time) func() time.Time {
	a := &anchorTime{now: now}
	return a.at
}

// anchorTime is a schedule's start: fixed by its first use, or set from
// another process's (follow, see FollowSchedule).
type anchorTime struct {
	now func() time.Time
	mu  sync.Mutex
	set bool
	t0  time.Time
}

func (a *anchorTime) at() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.set {
		a.t0, a.set = a.now(), true
	}
	return a.t0
}

func (a *anchorTime) follow(t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.t0, a.set = t, true
}

// dueCount returns how many records are due after elapsed time e.
func (p *pacer) dueCount(e time.Duration) int64 {
	if e <= 0 {
		return 0
	}
	// floor(e·rate / (parts·1e9)) in 128 bits, so high rates and long runs
	// cannot overflow.
	hi, lo := bits.Mul64(uint64(e), p.rate)
	div := p.parts * uint64(time.Second)
	if hi >= div {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, div)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// dueAt returns the elapsed time at which n records are due.
func (p *pacer) dueAt(n int64) time.Duration {
	// ceil(n·parts·1e9 / rate)
	hi, lo := bits.Mul64(uint64(n), p.parts*uint64(time.Second))
	lo, c := bits.Add64(lo, p.rate-1, 0)
	hi += c
	if hi >= p.rate {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, p.rate)
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(q)
}

// take returns how many records starting at index s may be emitted now, at
// most limit (> 0). If fewer than a quantum's worth (or limit, if smaller)
// are due, it sleeps until that many are, so batches do not shrink to a
// record or two at high rates.
func (p *pacer) take(ctx context.Context, s int64, limit int64) (int64, error) {
	want := int64(p.rate / p.parts / uint64(time.Second/paceQuantum))
	want = max(1, min(want, limit))
	t0 := p.start()
	s -= p.base
	for {
		e := p.now().Sub(t0)
		if avail := p.dueCount(e) - s; avail >= want {
			return min(avail, limit), nil
		}
		if err := p.sleep(ctx, p.dueAt(s+want)-e); err != nil {
			return 0, err
		}
	}
}

// Paced is implemented by sources whose records become available on a
// schedule (gen: with rate=): Due says how many records, summed over the
// partitions, are available by wall time at, counted as positions (a
// partition's feed starts at the position it was first opened at, see
// pacer). Before the first Open it is the sum of those starts.
type Paced interface {
	Due(at time.Time) int64
}

// Due implements Paced for a paced generator; an unpaced one offers every
// record at once, which Due cannot express, so it is not Paced (see
// AsPaced).
func (g *genSource) Due(at time.Time) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var e time.Duration
	if len(g.bases) > 0 {
		e = at.Sub(g.start.at())
	}
	p := &pacer{rate: uint64(g.cfg.rate), parts: uint64(g.cfg.parts)}
	n := p.dueCount(e)
	var sum int64
	for i := range g.names {
		d := g.bases[i] + n // a partition never opened starts at 0
		if d < n {          // overflow
			d = math.MaxInt64
		}
		if g.cfg.records > 0 {
			d = min(d, g.cfg.count(int64(i)))
		}
		sum += d
	}
	return sum
}

// AsPaced returns src's schedule when records become available on one.
func AsPaced(src Source) (Paced, bool) {
	if g, ok := src.(*genSource); ok {
		return g, g.cfg.rate > 0
	}
	p, ok := src.(Paced)
	return p, ok
}
