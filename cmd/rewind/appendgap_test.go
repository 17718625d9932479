//go:build linux

package main

import (
	"io/fs"
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

// The append gap (#12): an append file is visible from its flush, and the
// rows it holds are not produced again once a recovery point covers them.
// A process killed just after the second recovery point is durable (for
// disk-phase: after the first partition of a job commit is marked
// written) leaves files that only this point covers. One of them is
// deleted or damaged, and the resume must refuse it (exit 1, one line
// naming it) or finish with the reference's output; never exit 0 with its
// rows missing.

// gapExec kills at point, occurrence occ; firstPoint, if set, matches the
// store object of the recovery point before the one killed at, which
// everything the gap is about was flushed after.
type gapExec struct {
	name       string
	settings   []string
	point      string
	occ        int
	firstPoint func(rel string) bool
}

var gapExecs = []gapExec{
	{"recordwise", []string{"--checkpoint-interval", "100ms"}, "sink.before-commit", 2,
		func(rel string) bool { return strings.HasSuffix(rel, "/_metadata") && strings.Contains(rel, "/chk-") }},
	{"microbatch", []string{"--max-batch-records", "4000"}, "batch.after-commit", 2,
		func(rel string) bool { return strings.Contains(rel, "/commits/") }},
	// The first partition of the first job commit is marked written.
	{"diskphase", []string{"--job-records", "4000"}, "job.after-partition", 1, nil},
}

// TestAppendGapIsClosed: a covered append file deleted or damaged after a
// kill between a recovery point and the sink's record is refused.
func TestAppendGapIsClosed(t *testing.T) {
	seed := testseed.Seed(t)
	t.Logf("seed %d (replay with REWIND_TEST_SEED=%d go test -run TestAppendGapIsClosed ./cmd/rewind/)", seed, seed)
	// Each flush its own visible file, and rolling with an age no run
	// here reaches: the covered rows are then in in-progress files (and,
	// for disk-phase, whose receipts roll, in visible ones).
	rolls := []string{"0", "1h"}
	for i, e := range gapExecs {
		for k, damage := range []string{"deleted", "flipped"} {
			for l, roll := range rolls {
				t.Run(e.name+"-"+damage+"-roll-age-"+roll, func(t *testing.T) {
					t.Parallel()
					r := rand.New(rand.NewPCG(seed, uint64(i*100+k*10+l)))
					appendGap(t, e, damage, roll, r)
				})
			}
		}
	}
}

func appendGap(t *testing.T, e gapExec, damage, roll string, r *rand.Rand) {
	dataSeed := 1 + r.IntN(1000)
	format := []string{"parquet", "csv"}[r.IntN(2)]
	dir := t.TempDir()
	out, store := filepath.Join(dir, "out"), filepath.Join(dir, "store")
	args := append([]string{"run", "--executor", e.name, "--job", "etl", "--sink-mode", "append", "--output-format", format,
		"--input", genInput(dataSeed, pointKillRate), "--output", out, "--storage", "file://" + store,
		"--summary", "json", "--roll-age", roll}, e.settings...)
	fail := processKill(e.point, e.occ)
	t.Logf("input seed %d, format %s; first process killed by --fail %s", dataSeed, format, fail)
	p := startCLI(t, dir, append(slices.Clone(args), "--fail", fail)...)
	p.wait(t, time.Minute)
	if ok, how := p.killedBySIGKILL(); !ok {
		t.Fatalf("the first process was to kill itself at %s, but it %s; stderr:\n%s", fail, how, p.stderr)
	}
	var after time.Time
	if e.firstPoint != nil {
		after = firstPointAt(t, store, e.firstPoint)
	}
	path := firstAppendAfter(t, out, after)
	switch damage {
	case "deleted":
		must(t, os.Remove(path))
	case "flipped":
		b := readFile(t, path)
		b[r.IntN(len(b))] ^= 0x5A
		must(t, os.WriteFile(path, b, 0o644))
	}
	t.Logf("%s %s", damage, path)

	last := startCLI(t, dir, append(args, "--resume")...)
	last.wait(t, 2*time.Minute)
	stderr := last.stderr.String()
	code := last.state.ExitCode()
	if code == 0 {
		// Acceptable only if the rows came back.
		j, err := job.Build("etl", job.DefaultParams)
		must(t, err)
		got, _, err := sink.Resolve(out, j.Output)
		must(t, err)
		want := referenceOutput(t, j, []string{"--input", genInput(dataSeed, 0)})
		if diff := got.Diff(want, 5); diff != "" {
			t.Fatalf("resume after the covered file %s was %s exited 0 with the output differing from the reference (%d rows):\n%s",
				path, damage, len(want.Rows), diff)
		}
		t.Logf("the resumed run finished with the reference's output")
		return
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	errLine := lines[len(lines)-1]
	if code != exitFailure || !strings.Contains(errLine, path) || !strings.Contains(errLine, "--resume") {
		t.Fatalf("resume after %s %s: exit %d, last stderr line %q; want exit 1 and one line naming it and what to do. stderr:\n%s",
			damage, path, code, errLine, stderr)
	}
	for _, bad := range []string{"panic", "goroutine ", "internal error"} {
		if strings.Contains(stderr, bad) {
			t.Fatalf("resume: stderr shows %q:\n%s", bad, stderr)
		}
	}
	t.Logf("refused: %s", errLine)
}

// firstPointAt returns when the oldest store object match accepts was
// written: the first recovery point.
func firstPointAt(t *testing.T, store string, match func(rel string) bool) time.Time {
	t.Helper()
	var at time.Time
	err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !match(filepath.ToSlash(p)) {
			return err
		}
		fi, err := d.Info()
		if err == nil && (at.IsZero() || fi.ModTime().Before(at)) {
			at = fi.ModTime()
		}
		return err
	})
	must(t, err)
	if at.IsZero() {
		t.Fatalf("no recovery point in %s: the killed process did not reach the moment this test is about", store)
	}
	return at
}

// firstAppendAfter returns the append file, visible or in progress,
// flushed to first after the first recovery point: one whose rows (some
// of them, for an in-progress file) only the second recovery point covers.
func firstAppendAfter(t *testing.T, out string, after time.Time) string {
	t.Helper()
	var best string
	var bestAt time.Time
	for _, dir := range []string{out, filepath.Join(out, sink.InProgressDir)} {
		entries, err := os.ReadDir(dir)
		if os.IsNotExist(err) {
			continue
		}
		must(t, err)
		for _, en := range entries {
			if !strings.HasPrefix(en.Name(), "part-s") {
				continue
			}
			fi, err := en.Info()
			must(t, err)
			if fi.ModTime().After(after) && (best == "" || fi.ModTime().Before(bestAt)) {
				best, bestAt = filepath.Join(dir, en.Name()), fi.ModTime()
			}
		}
	}
	if best == "" {
		t.Fatalf("no append file in %s was flushed after the first recovery point: the damage this test is about cannot be made", out)
	}
	return best
}
