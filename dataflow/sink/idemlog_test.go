package sink

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// holdApplier keeps the applier from writing any transaction for the rest
// of the test, so acknowledged rows stay in the log only, as a process
// killed before its applier caught up leaves them.
func holdApplier(t *testing.T) {
	t.Helper()
	old := applyEvery
	applyEvery = time.Hour
	t.Cleanup(func() { applyEvery = old })
}

// idemLogKilled flushes three rounds of rows (three log frames), each
// followed by a Record as an executor does before its recovery point, and
// closes the sink as a killed process leaves it: with the applier held,
// every row is in the log and none in the store. With rotate the log is
// rotated after the first frame, so _idempotent-old.log holds it.
func idemLogKilled(t *testing.T, f *fixture, j *Journal, rotate bool) (rounds [][][]int64) {
	t.Helper()
	holdApplier(t)
	if rotate {
		old := idemSegmentBytes
		idemSegmentBytes = 1
		t.Cleanup(func() { idemSegmentBytes = old })
	}
	r, _ := newRand(t)
	g := newGen(r, 300, 3000)
	s := f.open(Idempotent, Parquet)
	attach(t, s, j)
	w := f.writer(s, 0, 0)
	for e := range int64(3) {
		rows := g.rows(200)
		f.write(w, e, rows)
		must(t, w.Flush(e), "flush")
		must(t, s.Record(e), "record")
		rounds = append(rounds, rows)
	}
	must(t, w.Close(), "close writer")
	must(t, s.Close(), "close")
	return rounds
}

// storeRows is how many rows the runs the manifest at path names hold.
func storeRows(t *testing.T, path string) int {
	t.Helper()
	m, present, err := readManifest(path)
	must(t, err, "read manifest")
	if !present {
		t.Fatalf("no manifest at %s", path)
	}
	n := 0
	for _, r := range m.runs {
		n += int(r.rows)
	}
	return n
}

// runFiles lists the run files in dir, oldest first.
func runFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range dirNames(t, dir) {
		if _, ok := runNumber(n); ok {
			out = append(out, filepath.Join(dir, n))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no run file in %s: nothing to damage", dir)
	}
	return out
}

func reopen(t *testing.T, f *fixture, j *Journal) (Sink, error) {
	t.Helper()
	applyEvery = time.Millisecond // applying again; holdApplier restores it
	s, err := Open(f.dir, Idempotent, Parquet, f.layout, f.mem)
	if err == nil {
		if err = s.(Attacher).Attach(j); err != nil {
			s.Close()
		}
	}
	return s, err
}

func flat(rounds [][][]int64) (all [][]int64) {
	for _, r := range rounds {
		all = append(all, r...)
	}
	return all
}

// TestIdempotentLogReplay: rows acknowledged into the log but never
// applied (the process was killed first) are applied by the next open,
// from both log files when the log was rotated, and the export then holds
// them all; a finished store leaves an empty log.
func TestIdempotentLogReplay(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		name := "one-file"
		if rotate {
			name = "rotated"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			rounds := idemLogKilled(t, f, j, rotate)
			if n := storeRows(t, filepath.Join(f.dir, IdempotentStore)); n != 0 {
				t.Fatalf("the held applier wrote %d rows into the store; the test needs them in the log only", n)
			}
			_, err := os.Stat(filepath.Join(f.dir, idemLogOld))
			if rotate != (err == nil) {
				t.Fatalf("rotate %v, but %s: %v", rotate, idemLogOld, err)
			}
			s, err := reopen(t, f, j)
			must(t, err, "reopen")
			must(t, s.Finish(), "finish")
			must(t, s.Close(), "close")
			f.wantResolved(flat(rounds))
			fi, err := os.Stat(filepath.Join(f.dir, IdempotentLog))
			must(t, err, "stat log")
			if fi.Size() != idemLogHeaderLen {
				t.Fatalf("a finished store's log has %d bytes, want only its %d-byte header", fi.Size(), idemLogHeaderLen)
			}
		})
	}
}

// TestIdempotentLogTornTail: a frame cut short at the end of the log, as
// a crash during its append leaves it, was never acknowledged: it is
// dropped and the rows before it are kept. Here the cut frame had been
// recorded too, so the loss is refused.
func TestIdempotentLogTornTail(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	rounds := idemLogKilled(t, f, j, false)
	p := filepath.Join(f.dir, IdempotentLog)
	fi, err := os.Stat(p)
	must(t, err, "stat")
	must(t, os.Truncate(p, fi.Size()-10), "truncate")

	// Without the record (a frame flushed after the newest recovery
	// point): the first two rounds come back, the third is not there.
	f2 := newFixture(t)
	copyDir(t, f.dir, f2.dir)
	s, err := Open(f2.dir, Idempotent, Parquet, f2.layout, f2.mem)
	must(t, err, "open without a journal")
	must(t, s.Finish(), "finish")
	must(t, s.Close(), "close")
	f2.wantResolved(flat(rounds[:2]))

	// With the record saying the third frame was acknowledged: refused.
	_, err = reopen(t, f, j)
	wantRefusal(t, err, p, "open and attach after the recorded frame was cut")
}

// TestIdempotentLogDamage: a log deleted, truncated, replaced or with a
// byte flipped between a kill and the resume is refused with one line
// naming the file (never a silent gap, never a panic).
func TestIdempotentLogDamage(t *testing.T) {
	logp := func(f *fixture) string { return filepath.Join(f.dir, IdempotentLog) }
	cases := []struct {
		name   string
		rotate bool
		damage func(t *testing.T, f *fixture) string
	}{
		{"deleted", false, func(t *testing.T, f *fixture) string { must(t, os.Remove(logp(f)), "rm"); return logp(f) }},
		{"truncated-0", false, func(t *testing.T, f *fixture) string { must(t, os.Truncate(logp(f), 0), "truncate"); return logp(f) }},
		{"truncated-half", false, func(t *testing.T, f *fixture) string {
			fi, err := os.Stat(logp(f))
			must(t, err, "stat")
			must(t, os.Truncate(logp(f), fi.Size()/2), "truncate")
			return logp(f)
		}},
		{"first-frame-flipped", false, func(t *testing.T, f *fixture) string {
			flipAt(t, logp(f), idemLogHeaderLen+idemFrameHdrLen+5)
			return logp(f)
		}},
		{"header-flipped", false, func(t *testing.T, f *fixture) string { flipAt(t, logp(f), 20); return logp(f) }},
		{"frame-length-flipped", false, func(t *testing.T, f *fixture) string {
			flipAt(t, logp(f), idemLogHeaderLen+1)
			return logp(f)
		}},
		{"old-deleted", true, func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.dir, idemLogOld)
			must(t, os.Remove(p), "rm")
			return p
		}},
		{"old-flipped", true, func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.dir, idemLogOld)
			b, err := os.ReadFile(p)
			must(t, err, "read")
			flipAt(t, p, len(b)-3)
			return p
		}},
		{"store-deleted", false, func(t *testing.T, f *fixture) string {
			p := filepath.Join(f.dir, IdempotentStore)
			must(t, os.Remove(p), "rm")
			return p
		}},
		{"replaced-by-another-stores", false, func(t *testing.T, f *fixture) string {
			other := newFixture(t)
			s := other.open(Idempotent, Parquet)
			must(t, s.Close(), "close other")
			b, err := os.ReadFile(logp(other))
			must(t, err, "read")
			must(t, os.WriteFile(logp(f), b, 0o644), "write")
			return logp(f)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			j := journalFor(t, t.TempDir())
			idemLogKilled(t, f, j, c.rotate)
			path := c.damage(t, f)
			s, err := reopen(t, f, j)
			if err == nil {
				s.Close()
			}
			wantRefusal(t, err, path, "open and attach")
		})
	}
}

func flipAt(t testing.TB, p string, at int) {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err, "read")
	b[at] ^= 0xFF
	must(t, os.WriteFile(p, b, 0o644), "write")
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	must(t, err, "list")
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		must(t, err, "read")
		must(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o644), "write")
	}
}

// TestIdempotentLogFrameFormat pins what a frame holds, so a change to
// the format is a decision: length, number, CRC32C, whole rows.
func TestIdempotentLogFrameFormat(t *testing.T) {
	f := newFixture(t)
	j := journalFor(t, t.TempDir())
	idemLogKilled(t, f, j, false)
	b, err := os.ReadFile(filepath.Join(f.dir, IdempotentLog))
	must(t, err, "read")
	if string(b[:8]) != "RWIDLOG1" {
		t.Fatalf("log starts %q, want the magic RWIDLOG1", b[:8])
	}
	n := binary.BigEndian.Uint32(b[idemLogHeaderLen:])
	seq := binary.BigEndian.Uint64(b[idemLogHeaderLen+4:])
	rowLen := 8*len(f.layout.WriteKey) + 8*f.layout.Schema.NumFields() + rowSumLen
	if seq != 1 || n != uint32(200*rowLen) {
		t.Fatalf("first frame: number %d with %d bytes, want number 1 with 200 rows of %d bytes", seq, n, rowLen)
	}
}
