//go:build linux

package soak

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// buildRewind builds the CLI (under -race when the test runs under it).
func buildRewind(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rewind")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/rewind-engine/rewind/cmd/rewind")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// TestQuickCampaign keeps the harness working: one schedule per mode with
// process kills and in-process crashes (no damage, which current code may
// legitimately refuse), run with the real binary, must all equal the
// reference. The long campaign is `make soak`.
func TestQuickCampaign(t *testing.T) {
	seed := testseed.Seed(t)
	bin := buildRewind(t)
	points, err := ListPoints(bin)
	if err != nil {
		t.Fatal(err)
	}
	// Whether a drawn kill or crash point is reached depends on how far a
	// process gets, so a round of one schedule per mode may exercise less
	// than it was drawn for; further rounds of fresh schedules run until
	// recovery was really tested (or the rounds run out, which fails).
	const rounds = 4
	next := make([]int, len(Modes))
	for m := range next {
		next[m] = m
	}
	var got Totals
	var ran []int
	for round := 0; round < rounds; round++ {
		var only []int
		for m := range Modes {
			for i := next[m]; ; i += len(Modes) {
				s := Draw(seed, i, points, false)
				fails := 0
				for _, p := range s.Procs {
					fails += len(p.Fails)
				}
				if len(s.Procs) >= 2 && s.Procs[0].Damage == nil && s.Procs[0].Kill.Point != "" && fails > 0 && noDamage(s) {
					only = append(only, i)
					next[m] = i + len(Modes)
					break
				}
			}
		}
		var log bytes.Buffer
		rep, err := Run(context.Background(), Config{Bin: bin, Work: t.TempDir(), Seed: seed, Only: only, Parallel: 2,
			Limit: time.Minute, Log: &log, Replay: "go run ./soak/cmd/soak -bin BIN"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d, round %d, schedules %v:\n%s", seed, round, only, log.String())
		if rep.ExitCode() != 0 || rep.All.Schedules != len(Modes) {
			t.Fatalf("seed %d (replay: REWIND_TEST_SEED=%d): %+v; want %d schedules, none failed", seed, seed, rep.All, len(Modes))
		}
		ran = append(ran, only...)
		got.Crashes += rep.All.Crashes
		got.Kills += rep.All.Kills
		got.Procs += rep.All.Procs
		if got.Crashes >= len(Modes) && got.Kills >= 1 && got.Procs >= 2*len(Modes) {
			return
		}
	}
	t.Fatalf("seed %d: schedules %v crashed %d times, killed %d processes, ran %d: too few to have tested recovery", seed, ran, got.Crashes, got.Kills, got.Procs)
}

func noDamage(s *Schedule) bool {
	for _, p := range s.Procs {
		if p.Damage != nil {
			return false
		}
	}
	return true
}

func TestDamage(t *testing.T) {
	dir := t.TempDir()
	store, out := filepath.Join(dir, "store"), filepath.Join(dir, "out")
	files := map[string]string{
		"store/microbatch/etl/RUN-1/offsets/00000000000000000001": "offsets one",
		"store/microbatch/etl/RUN-1/offsets/00000000000000000002": "offsets two",
		"store/microbatch/etl/RUN-0/offsets/00000000000000000001": "another run",
		"store/microbatch/etl/RUN-1/.tmp-x":                       "a temporary",
		"out/_idempotent.db":                                      "manifest",
		"out/_idempotent.log":                                     "log",
		"out/_rewind-run.lock":                                    "",
		"out/_staging/e3-s0-a1-p0.csv":                            "staged",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kinds, err := DurableFiles(store, out, "RUN-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for k, fs := range kinds {
		got = append(got, k+":"+strings.Repeat("+", len(fs)))
	}
	slices.Sort(got)
	want := "output _idempotent.db:+ output _idempotent.log:+ output _staging/eN-sN-aN-pN.csv:+ storage offsets/N:++"
	if strings.Join(got, " ") != want {
		t.Fatalf("durable files by kind: %v, want %s", got, want)
	}
	off := kinds["storage offsets/N"][0]
	if !(Damaged{File: off}).NamedIn([]string{"rewind: commits/1 exists without offsets/1: the log is damaged"}) {
		t.Fatalf("offsets/1 does not name %v", off.Names)
	}
	// A flip done by the campaign and by its printed command agree.
	path := off.Path
	orig, _ := os.ReadFile(path)
	d, ok, err := Damage{Kind: 3, Pick: 0, Action: "flip", At: 3}.Apply(kinds)
	if err != nil || !ok || d.File.Path != path {
		t.Fatalf("flip: %v %v %v", d, ok, err)
	}
	flipped, _ := os.ReadFile(path)
	if bytes.Equal(flipped, orig) || len(flipped) != len(orig) {
		t.Fatalf("flip left %q (was %q)", flipped, orig)
	}
	os.WriteFile(path, orig, 0o644)
	if out, err := exec.Command("sh", "-c", d.Shell()).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", d.Shell(), err, out)
	}
	byShell, _ := os.ReadFile(path)
	if !bytes.Equal(byShell, flipped) {
		t.Fatalf("the printed command %q made %q, the campaign %q", d.Shell(), byShell, flipped)
	}
	d, _, err = Damage{Kind: 0, Action: "delete"}.Apply(kinds)
	if _, serr := os.Stat(filepath.Join(out, "_idempotent.db")); err != nil || !os.IsNotExist(serr) || d.File.Kind != "output _idempotent.db" {
		t.Fatalf("delete: %v, %v, stat %v", d, err, serr)
	}
}
