package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// fakeRewind writes a shell script that acts as rewind towards the
// campaign: it lists two crash points, kills itself at a kill=process
// --fail, writes a one-row CSV output and a summary, and, with
// FAKE_WRONG=1 in its environment, a row other than the reference's. The
// campaign must find a wrong result the script reports as a success.
func fakeRewind(t *testing.T) string {
	t.Helper()
	var headers strings.Builder
	for _, j := range []string{"keyed-count", "windowed-sum", "join", "etl"} {
		l, err := layoutOf(j)
		if err != nil {
			t.Fatal(err)
		}
		cols := sink.ColumnNames(l.Schema)
		fmt.Fprintf(&headers, "\t%s) hdr=%s; n=%d ;;\n", j, strings.Join(cols, ","), len(cols))
	}
	script := `#!/bin/sh
case " $* " in *" --list-fail-points "*) printf 'point.a\nrun.before-finish\n'; exit 0 ;; esac
prev=; out=; job=; exe=
for a in "$@"; do
	case $prev in --output) out=$a ;; --job) job=$a ;; --executor) exe=$a ;; esac
	prev=$a
done
case $job in
` + headers.String() + `esac
v=1
if [ "$exe" != reference ] && [ "${FAKE_WRONG:-0}" = 1 ]; then v=2; fi
mkdir -p "$out"
row=$(yes "$v" | head -n "$n" | paste -sd, -)
if [ "$exe" != reference ]; then
	echo "rewind: run fake-1 (if this process dies, resume with --resume fake-1)" >&2
	echo '{"run_id":"fake-1"}' > "$out/_rewind-run.json"
fi
printf '%s\n%s\n' "$hdr" "$row" > "$out/part-0.csv"
case " $* " in *kill=process*) kill -9 $$ ;; esac
echo '{"run_id":"fake-1","resolved_rows":1,"sink_duplicate_rows":0,"sink_conflicting_rows":0,"lost_records":0}'
`
	path := filepath.Join(t.TempDir(), "rewind")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// findSchedule returns the first index of seed whose schedule ok accepts.
func findSchedule(t *testing.T, seed uint64, points Points, ok func(*Schedule) bool) int {
	t.Helper()
	for i := range 2000 {
		if s := Draw(seed, i, points, false); ok(s) {
			return i
		}
	}
	t.Fatalf("no schedule of seed %d among 2000 is of the kind the test needs", seed)
	return -1
}

func TestAFakeSilentWrongResultIsCaught(t *testing.T) {
	bin := fakeRewind(t)
	points, err := ListPoints(bin)
	if err != nil {
		t.Fatal(err)
	}
	const seed = 3
	damagedCSV := findSchedule(t, seed, points, func(s *Schedule) bool {
		return s.Format == "csv" && s.Procs[0].Kill != nil && s.Procs[0].Kill.Point != "" && s.Procs[0].Damage != nil
	})
	undamaged := findSchedule(t, seed, points, func(s *Schedule) bool {
		for _, p := range s.Procs {
			if p.Damage != nil || (p.Kill != nil && p.Kill.Point == "") {
				return false
			}
		}
		return s.Format == "csv"
	})
	campaign := func(wrong bool, i int) *Report {
		t.Setenv("FAKE_WRONG", map[bool]string{true: "1", false: "0"}[wrong])
		var log strings.Builder
		rep, err := Run(context.Background(), Config{Bin: bin, Work: t.TempDir(), Seed: seed, Only: []int{i}, Parallel: 1,
			Limit: 20 * time.Second, Log: &log, Replay: "soak"})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("wrong=%v, schedule %d:\n%s", wrong, i, log.String())
		return rep
	}

	rep := campaign(true, damagedCSV)
	if rep.All.Silent != 1 || rep.ExitCode() != 1 || len(rep.Failed) != 1 || rep.All.DamageTried < 1 {
		t.Fatalf("a wrong result after damage, reported as a success: totals %+v, exit %d; want one silent schedule, exit 1", rep.All, rep.ExitCode())
	}
	if got := rep.Failed[0].FailureText(rep.Config); !strings.Contains(got, fmt.Sprintf("-seed %d -only %d", seed, damagedCSV)) {
		t.Fatalf("the failure does not print the replay command:\n%s", got)
	}
	rep = campaign(true, undamaged)
	if rep.All.Failures != 1 || rep.All.Silent != 0 || rep.ExitCode() != 1 {
		t.Fatalf("a wrong result without damage: totals %+v, exit %d; want one failure, not silent, exit 1", rep.All, rep.ExitCode())
	}
	rep = campaign(false, damagedCSV)
	if rep.All.Failures != 0 || rep.All.DamageRecovered != 1 || rep.ExitCode() != 0 {
		t.Fatalf("the right result after damage: totals %+v, exit %d; want it recovered, exit 0", rep.All, rep.ExitCode())
	}
}
