//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// The output directory is not durable storage: between a kill and
// --resume a file the sink keeps there (the idempotent store, a staged
// transactional file of an epoch a recovery point covers) may be deleted,
// truncated or damaged. The resumed run must then end with exit 1 and one
// line naming the file, never exit 0 with rows missing, never publish a
// damaged file, never panic; or, where the damage is harmless, finish with
// the reference's output.

// destExec is an executor setting whose process kills itself at point,
// just after a recovery point (batch, checkpoint, finite job) is durable,
// and for the transactional sink at txnPoint, where an epoch is staged.
// The job is etl: every record is a row, so every epoch stages rows.
type destExec struct {
	name     string
	settings []string
	point    string
	txnPoint string
	occ      int
	// stagedCommitted: at txnPoint the oldest staged epoch is covered by a
	// recovery point, so its rows are not produced again. Disk-phase
	// writes the sink in its job commit, from materialised files in
	// durable storage, and publishes before the commit is durable: what
	// it stages is never committed, and a resume writes it again.
	stagedCommitted bool
}

var destExecs = []destExec{
	{"microbatch", []string{"--max-batch-records", "4000"}, "batch.after-commit", "batch.after-commit", 2, true},
	{"recordwise", []string{"--checkpoint-interval", "100ms"}, "checkpoint.after-metadata", "checkpoint.after-metadata", 2, true},
	{"diskphase", []string{"--job-records", "4000"}, "job.after-commit", "job.mid-commit", 2, false},
}

// destDamage is what is done to the output directory between the kill and
// the resume. It returns the path the refusal must name, and whether the
// damaged file is one the resume can write again (then it must finish with
// the reference's output) or may be (harmless bytes).
type destDamage struct {
	name string
	mode string
	do   func(t *testing.T, e destExec, out string, r *rand.Rand) (path string, rebuilt, harmless bool)
}

var destDamages = []destDamage{
	{"store-truncated", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := filepath.Join(out, sink.IdempotentStore)
		must(t, os.Truncate(p, 0))
		return p, false, false
	}},
	{"store-deleted", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := filepath.Join(out, sink.IdempotentStore)
		must(t, os.Remove(p))
		return p, false, false
	}},
	// Every row of the oldest run overwritten, or a few seeded bytes
	// flipped anywhere in it: its checksum in the manifest finds either.
	{"run-overwritten", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestRun(t, out)
		b := readFile(t, p)
		for i := 56; i < len(b); i++ { // past the run's header
			b[i] = 0xEF
		}
		must(t, os.WriteFile(p, b, 0o644))
		return p, false, false
	}},
	{"run-bytes-flipped", "idempotent", func(t *testing.T, e destExec, out string, r *rand.Rand) (string, bool, bool) {
		p := oldestRun(t, out)
		b := readFile(t, p)
		for range 8 {
			b[r.IntN(len(b))] ^= 0xFF
		}
		must(t, os.WriteFile(p, b, 0o644))
		return p, false, false
	}},
	{"run-deleted", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestRun(t, out)
		must(t, os.Remove(p))
		return p, false, false
	}},
	// The store's log holds the rows acknowledged since the store's last
	// transaction: at the kill the applier may have moved them all into
	// the store (the damage is harmless) or not (it must be refused).
	{"log-deleted", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := filepath.Join(out, sink.IdempotentLog)
		must(t, os.Remove(p))
		return p, false, true
	}},
	{"log-truncated-half", "idempotent", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := filepath.Join(out, sink.IdempotentLog)
		b := readFile(t, p)
		must(t, os.Truncate(p, int64(len(b)/2)))
		return p, false, true
	}},
	{"log-bytes-flipped", "idempotent", func(t *testing.T, _ destExec, out string, r *rand.Rand) (string, bool, bool) {
		p := filepath.Join(out, sink.IdempotentLog)
		b := readFile(t, p)
		b[r.IntN(len(b))] ^= 0xFF
		must(t, os.WriteFile(p, b, 0o644))
		return p, false, true
	}},
	{"staged-deleted", "transactional", func(t *testing.T, e destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestStaged(t, out)
		must(t, os.Remove(p))
		return p, !e.stagedCommitted, false
	}},
	{"staged-corrupted", "transactional", func(t *testing.T, e destExec, out string, r *rand.Rand) (string, bool, bool) {
		p := oldestStaged(t, out)
		b := readFile(t, p)
		b[len(b)/4+r.IntN(len(b)/2)] ^= 0x5A
		must(t, os.WriteFile(p, b, 0o644))
		return p, !e.stagedCommitted, false
	}},
	{"staged-footer-corrupted", "transactional", func(t *testing.T, e destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestStaged(t, out)
		b := readFile(t, p)
		copy(b[len(b)-4:], "XXXX") // the Parquet magic
		must(t, os.WriteFile(p, b, 0o644))
		return p, !e.stagedCommitted, false
	}},
	// A published file of a committed epoch deleted: nothing will write
	// its rows again.
	{"published-deleted", "transactional", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		entries, err := os.ReadDir(out)
		must(t, err)
		for _, en := range entries {
			if strings.HasPrefix(en.Name(), "part-e") {
				p := filepath.Join(out, en.Name())
				must(t, os.Remove(p))
				return p, false, false
			}
		}
		t.Fatalf("the killed process had published nothing in %s: the damage this test is about cannot be made", out)
		return "", false, false
	}},
	// An append file a recovery point covers deleted (soak #2955) or with
	// a byte flipped (#2904): its rows are not produced again.
	{"append-deleted", "append", func(t *testing.T, _ destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestAppend(t, out)
		must(t, os.Remove(p))
		return p, false, false
	}},
	{"append-flipped", "append", func(t *testing.T, _ destExec, out string, r *rand.Rand) (string, bool, bool) {
		p := oldestAppend(t, out)
		b := readFile(t, p)
		b[r.IntN(len(b))] ^= 0x5A
		must(t, os.WriteFile(p, b, 0o644))
		return p, false, false
	}},
	// The same with rolling, whose rows wait in in-progress files (an age
	// no run here reaches): the oldest holds rows the first recovery point
	// covers, up to a prefix the record names. Damage past that prefix, or
	// to a file whose rolled copy is on record (disk-phase rolls at each
	// receipt), is harmless: the reference's output, or a refusal naming it.
	{"inprogress-deleted", "append-inprogress", func(t *testing.T, e destExec, out string, _ *rand.Rand) (string, bool, bool) {
		p := oldestInProgress(t, e, out)
		must(t, os.Remove(p))
		return p, false, true
	}},
	{"inprogress-flipped", "append-inprogress", func(t *testing.T, e destExec, out string, r *rand.Rand) (string, bool, bool) {
		p := oldestInProgress(t, e, out)
		b := readFile(t, p)
		b[r.IntN(len(b))] ^= 0x5A
		must(t, os.WriteFile(p, b, 0o644))
		return p, false, true
	}},
}

// oldestRun returns the idempotent store's oldest run file (the lowest
// number: they are named _idempotent-<8 digits>.run).
func oldestRun(t *testing.T, out string) string {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(out, "_idempotent-[0-9]*.run"))
	must(t, err)
	if len(runs) == 0 {
		t.Fatalf("the killed process left no run of the idempotent store in %s: the damage this test is about cannot be made", out)
	}
	slices.Sort(runs)
	return runs[0]
}

// oldestInProgress is oldestAppend's in-progress file. Disk-phase rolls at
// every receipt, and a complete job commit removes the in-progress files
// its record lists, so at its kill point (after a job commit) it has none.
func oldestInProgress(t *testing.T, e destExec, out string) string {
	t.Helper()
	dir := filepath.Join(out, sink.InProgressDir)
	if entries, _ := os.ReadDir(dir); len(entries) == 0 && e.name == "diskphase" {
		t.Skip("disk-phase keeps no in-progress file past a complete job commit")
	}
	return oldestAppend(t, dir)
}

// oldestAppend returns the append file flushed first: at the kill points
// (the second recovery point) one the first recovery point covers.
func oldestAppend(t *testing.T, out string) string {
	t.Helper()
	entries, err := os.ReadDir(out)
	must(t, err)
	var best string
	var bestAt time.Time
	for _, en := range entries {
		if !strings.HasPrefix(en.Name(), "part-s") {
			continue
		}
		fi, err := en.Info()
		must(t, err)
		if best == "" || fi.ModTime().Before(bestAt) {
			best, bestAt = en.Name(), fi.ModTime()
		}
	}
	if best == "" {
		t.Fatalf("the killed process left no append file in %s: the damage this test is about cannot be made", out)
	}
	return filepath.Join(out, best)
}

// oldestStaged returns a staged file of the oldest staged epoch: at the
// kill points the one the newest recovery point covers (microbatch,
// recordwise) or the job being committed (diskphase).
func oldestStaged(t *testing.T, out string) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(out, sink.StagingDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("the killed process left nothing staged in %s: the damage this test is about cannot be made", sink.StagingDir)
	}
	epoch := func(n string) int {
		var e int
		fmt.Sscanf(n, "e%d-", &e)
		return e
	}
	slices.SortFunc(names, func(a, b string) int { return epoch(a) - epoch(b) })
	return filepath.Join(out, sink.StagingDir, names[0])
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDamagedDestinationIsRefused kills each executor just after a
// recovery point is durable, damages what its sink keeps in the output
// directory, and resumes: exit 1 with one line naming the damaged file
// (or, for damage that may be harmless, the reference's output), no panic,
// and no damaged staged file published.
func TestDamagedDestinationIsRefused(t *testing.T) {
	seed := testseed.Seed(t)
	t.Logf("seed %d (replay with REWIND_TEST_SEED=%d go test -run TestDamagedDestinationIsRefused ./cmd/rewind/)", seed, seed)
	for i, e := range destExecs {
		for k, d := range destDamages {
			t.Run(e.name+"-"+d.name, func(t *testing.T) {
				t.Parallel()
				r := rand.New(rand.NewPCG(seed, uint64(i*100+k)))
				damageAndResume(t, e, d, r)
			})
		}
	}
}

func damageAndResume(t *testing.T, e destExec, d destDamage, r *rand.Rand) {
	dataSeed := 1 + r.IntN(1000)
	format := []string{"parquet", "csv"}[r.IntN(2)]
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	// Append files themselves: every flush visible at once; in-progress
	// files: rolling with an age no run here reaches.
	mode, roll := d.mode, "0"
	if d.mode == "append-inprogress" {
		mode, roll = "append", "1h"
	}
	args := append([]string{"run", "--executor", e.name, "--job", "etl", "--sink-mode", mode, "--roll-age", roll, "--output-format", format,
		"--input", genInput(dataSeed, pointKillRate), "--output", out, "--storage", "file://" + filepath.Join(dir, "store"),
		"--summary", "json"}, e.settings...)
	point := e.point
	if d.mode == "transactional" {
		point = e.txnPoint
	}
	fail := processKill(point, e.occ)
	t.Logf("input seed %d, format %s; first process killed by --fail %s", dataSeed, format, fail)
	p := startCLI(t, dir, append(slices.Clone(args), "--fail", fail)...)
	id := p.runID(t, false)
	p.wait(t, time.Minute)
	if ok, how := p.killedBySIGKILL(); !ok {
		t.Fatalf("the first process was to kill itself at %s, but it %s; stderr:\n%s", fail, how, p.stderr)
	}
	path, rebuilt, harmless := d.do(t, e, out, r)
	staged := strings.Contains(path, sink.StagingDir)

	// A store found damaged when the output is opened is refused before
	// the resumed run prints its id.
	last := startCLI(t, dir, append(args, "--resume")...)
	last.wait(t, 2*time.Minute)
	if m := runIDLine.FindStringSubmatch(last.stderr.String()); m != nil && m[3] != id {
		t.Fatalf("the resumed process runs %s, want %s", m[3], id)
	}
	stderr := last.stderr.String()
	code := last.state.ExitCode()
	for _, bad := range []string{"panic", "goroutine ", "internal error"} {
		if strings.Contains(stderr, bad) {
			t.Fatalf("resume after %s: stderr shows %q (exit %d):\n%s", d.name, bad, code, stderr)
		}
	}
	if rebuilt && code != 0 {
		t.Fatalf("resume after %s: exit %d; the damaged file is not committed, so the resume was to write it again. stderr:\n%s", d.name, code, stderr)
	}
	if code == 0 && (harmless || rebuilt) {
		j, err := job.Build("etl", job.DefaultParams)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := sink.Resolve(out, j.Output)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceOutput(t, j, []string{"--input", genInput(dataSeed, 0)})
		if diff := got.Diff(want, 5); diff != "" {
			t.Fatalf("resume after %s exited 0, but the output differs from the reference (%d rows):\n%s", d.name, len(want.Rows), diff)
		}
		t.Logf("the resumed run finished with the reference's output (damaged file written again: %v)", rebuilt)
		return
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	errLine := lines[len(lines)-1]
	if code != exitFailure || !strings.Contains(errLine, path) || !strings.Contains(errLine, "--resume") {
		t.Fatalf("resume after %s: exit %d, last stderr line %q; want exit 1 and one line naming %s and what to do. stderr:\n%s",
			d.name, code, errLine, path, stderr)
	}
	for _, l := range lines[:len(lines)-1] {
		if strings.Contains(l, path) || !strings.HasPrefix(l, "rewind: ") {
			t.Errorf("resume after %s: more than the one error line: %q", d.name, l)
		}
	}
	if staged {
		// The damaged file's epoch was not published: its visible name
		// is absent.
		base := filepath.Base(path)
		var ep, sub, att, part int
		if _, err := fmt.Sscanf(strings.TrimSuffix(base, filepath.Ext(base)), "e%d-s%d-a%d-p%d", &ep, &sub, &att, &part); err != nil {
			t.Fatalf("staged name %s: %v", base, err)
		}
		visible := filepath.Join(out, fmt.Sprintf("part-e%d-s%d-p%d%s", ep, sub, part, filepath.Ext(base)))
		if _, err := os.Stat(visible); err == nil {
			t.Errorf("resume after %s published %s, whose staged file was damaged", d.name, visible)
		}
	}
	t.Logf("refused: %s", errLine)
}
