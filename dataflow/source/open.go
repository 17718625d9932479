package source

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Options are the settings a caller supplies when it opens a source from a
// spec. The zero value is usable: seed 0 and real time.
type Options struct {
	// DefaultSeed is the generator seed used when a gen: or push: spec does
	// not name one, so one run-wide seed makes every input reproducible.
	DefaultSeed int64
	// Now returns the current time. Pacing (rate=) reads it; nil means
	// time.Now. Tests inject a fake clock so pacing needs no real waiting.
	Now func() time.Time
	// Sleep waits for d or until ctx is done, whichever comes first, and
	// returns ctx.Err() in the second case. nil means a real timer. A fake
	// clock advances its time by d instead of waiting.
	Sleep func(ctx context.Context, d time.Duration) error
}

// withDefaults fills the clock functions with real time where unset.
func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = realSleep
	}
	return o
}

// realSleep waits for d on a timer, giving up early when ctx is done.
func realSleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Open opens the source named by spec. The text before the first ':' picks
// the kind:
//
//	gen:records=N,keys=K,partitions=P,rate=R,seed=S,skew=Z,disorder=D
//	file:PATH            (a CSV or Parquet file, or a directory of them)
//	push:listen=127.0.0.1:PORT
//	push:records=N,keys=K,seed=S,rate=R,skew=Z,disorder=D
//
// gen: is re-readable and, with records=0, endless. Defaults: records=1e6,
// keys=1000, partitions=4, rate=0 (unpaced), seed=opts.DefaultSeed, skew=0,
// disorder=0. Partition p ("p0".."p{P-1}") holds ids ≡ p (mod P), so a
// bounded run has ids exactly 0..records-1. Each record is a pure function of
// (seed, partition, sequence number), so reading from a position costs the
// same as reading from the start. key is uniform in [0,keys), or for skew=Z
// follows the exact discrete Zipf law P(k) ∝ 1/(k+1)^Z (key 0 most
// frequent); value is uniform in [-10,90) (about 10% negative). ts advances
// 1 ms per record within a partition and is up to disorder ms early, which
// guarantees ts >= (running maximum ts of the partition) - disorder: a window
// allowing that much disorder sees no late rows. rate=R paces the source to
// R records/s in total (R/P per partition) on a schedule anchored at the
// first reader Open, so a reader reopened after downtime finds its backlog
// due at once; a partition's schedule counts from the position its first
// reader opened at, so a process resuming a run is not held back for the
// records an earlier process read.
//
// file: is re-readable and bounded: one partition per file, named by the
// file name; a directory is read as an append-only log of such files in name
// order, skipping names that start with '_' or '.'. A file is Parquet when
// its name ends in .parquet or .pq or it starts with the Parquet magic bytes,
// otherwise CSV with the exact header "id,key,value,ts".
//
// push: is forgetful (see PushSource): one partition "push" fed over a
// loopback TCP connection, either by an external pusher (listen=) or by a
// pusher the source starts itself with the gen: parameters (one partition).
//
// Every gen: and generated push: parameter is optional. A malformed spec
// returns one error that says what is wrong and what is allowed, so a typo on
// the command line never silently falls back to a default.
//
// Every source's Open also accepts the zero Position (no partition name,
// offset 0) as the start of the partition, so a first run needs no names;
// any other position must name the partition it is opened on.
func Open(spec string, opts Options) (Source, error) {
	opts = opts.withDefaults()
	kind, rest, ok := strings.Cut(spec, ":")
	if !ok {
		return nil, fmt.Errorf("source %q: missing kind prefix (want gen:..., file:PATH or push:...)", spec)
	}
	switch kind {
	case "gen":
		return openGen(spec, rest, opts)
	case "file":
		return openFile(spec, rest)
	case "push":
		return openPush(spec, rest, opts)
	default:
		return nil, fmt.Errorf("source %q: unknown kind %q (allowed: gen, file, push)", spec, kind)
	}
}

// param is one key=value pair of a spec.
type param struct{ key, val string }

// parseParams splits "k=v,k=v" and checks every key against allowed, so a
// misspelt parameter is an error instead of being ignored. kind prefixes the
// messages ("gen", "push").
func parseParams(kind, body string, allowed []string) ([]param, error) {
	if body == "" {
		return nil, nil
	}
	var out []param
	seen := map[string]bool{}
	for _, part := range strings.Split(body, ",") {
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		v = strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: malformed parameter %q (want name=value; allowed: %s)", kind, part, strings.Join(allowed, ", "))
		}
		known := false
		for _, a := range allowed {
			if a == k {
				known = true
				break
			}
		}
		if !known {
			return nil, fmt.Errorf("%s: unknown parameter %q (allowed: %s)", kind, k, strings.Join(allowed, ", "))
		}
		if seen[k] {
			return nil, fmt.Errorf("%s: parameter %q given twice", kind, k)
		}
		seen[k] = true
		out = append(out, param{k, v})
	}
	return out, nil
}

// parseCount parses a non-negative integer parameter. Integral float
// notation ("1e6") is accepted too because large record counts and rates are
// easier to write that way.
func parseCount(kind string, p param) (int64, error) {
	if n, err := strconv.ParseInt(p.val, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%s: %s=%s is negative (want an integer >= 0)", kind, p.key, p.val)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(p.val, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f >= math.MaxInt64 {
		return 0, fmt.Errorf("%s: %s=%q is not an integer >= 0", kind, p.key, p.val)
	}
	return int64(f), nil
}

// checkOpenPos validates the position a partition is opened at. The zero
// Position (no partition name, offset 0) is accepted as "from the start" so
// a first run needs no names; any other position must name partition name,
// so a saved position never silently applies to another partition.
func checkOpenPos(kind string, names []string, i int, pos Position) (string, error) {
	if i < 0 || i >= len(names) {
		return "", fmt.Errorf("%s: partition index %d out of range (source has %d partitions)", kind, i, len(names))
	}
	name := names[i]
	if pos.Partition != name && !(pos.Partition == "" && pos.Offset == 0) {
		return "", fmt.Errorf("%s: position names partition %q, but partition %d is %q", kind, pos.Partition, i, name)
	}
	if pos.Offset < 0 {
		return "", fmt.Errorf("%s: partition %q: negative position %d", kind, name, pos.Offset)
	}
	return name, nil
}

// checkMax rejects a non-positive batch limit, which could otherwise make a
// reader spin returning empty batches.
func checkMax(kind string, max int) error {
	if max <= 0 {
		return fmt.Errorf("%s: Next called with max=%d (want > 0)", kind, max)
	}
	return nil
}

// parseInt64 parses a decimal int64 from b without allocating: the file and
// push readers call it for every field of every row.
func parseInt64(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var u uint64
	for _, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d)
	}
	// 19 digits fit in a uint64 without overflow; check the int64 range.
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}
