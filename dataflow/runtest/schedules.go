package runtest

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ScheduleFlags are an executor's flags for its random crash schedules:
// -<prefix>.schedules (how many) and -<prefix>.seed (replay one).
type ScheduleFlags struct {
	prefix string
	n      *int
	seed   *int64
}

// NewScheduleFlags registers -<prefix>.schedules, defaulting to n, and
// -<prefix>.seed on the command line. Call it from a package-level var of
// the executor's tests, so the flags exist before the test binary parses.
func NewScheduleFlags(prefix string, n int) *ScheduleFlags {
	return &ScheduleFlags{
		prefix: prefix,
		n:      flag.Int(prefix+".schedules", n, "number of seeded random crash schedules in the conformance suite's RandomCrashSchedules"),
		seed:   flag.Int64(prefix+".seed", 0, "run only this seed of the conformance suite's RandomCrashSchedules (0: all; REWIND_TEST_SEED also sets it)"),
	}
}

// Schedules describes one executor's random crash schedules.
type Schedules struct {
	Flags *ScheduleFlags
	// Short, when positive, caps the number of schedules under -short.
	Short int
	// Parallel runs the schedules' subtests in parallel with each other.
	Parallel bool
	// Coalesce says a fault that fires while a crash is still being
	// detected joins that crash, so a run may count fewer crashes than
	// faults fired (CheckCoalescedCrashes instead of CheckCrashes).
	Coalesce bool
	// Draw draws the schedule of one seed: settings and faults from the
	// executor's fail points and kills. The same seed draws the same
	// schedule, so a failure replays.
	Draw func(seed int64) Schedule
}

// Schedule is one drawn crash schedule.
type Schedule struct {
	// What describes the draw (job, sink, parallelism, sizes, faults).
	What string
	// Run runs it, surviving its crashes, and returns the finished run.
	Run func(t *testing.T) Result
}

// seeds are the seeds to run: the one of -<prefix>.seed or
// REWIND_TEST_SEED when either is set, else 1 to the schedule count.
func (f *ScheduleFlags) seeds(t *testing.T, short int) []int64 {
	t.Helper()
	only := *f.seed
	if s := os.Getenv("REWIND_TEST_SEED"); s != "" && only == 0 {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("REWIND_TEST_SEED=%q: %v", s, err)
		}
		only = v
	}
	if only != 0 {
		return []int64{only}
	}
	n := *f.n
	if testing.Short() && short > 0 && n > short {
		n = short
	}
	seeds := make([]int64, 0, n)
	for i := range n {
		seeds = append(seeds, int64(i+1))
	}
	return seeds
}

// crashSchedules runs the subject's seeded random crash schedules, one
// subtest "seed=N" each. Every run must survive its crashes with the
// reference's output (CheckOutput), bill its crashes (CheckCrashes or
// CheckCoalescedCrashes), and pass the executor's own checks. A failure
// names its seed, its draw and the command that replays it.
func crashSchedules(t *testing.T, s Subject) {
	sch := s.Schedules
	if sch.Flags == nil || sch.Draw == nil || s.Package == "" {
		t.Fatalf("%s: the subject's Schedules are incomplete", s.Executor.Name())
	}
	seeds := sch.Flags.seeds(t, sch.Short)
	if len(seeds) == 0 {
		t.Fatalf("%s: no crash schedule to run (-%s.schedules=%d)", s.Executor.Name(), sch.Flags.prefix, *sch.Flags.n)
	}
	// -run takes one pattern per level of subtest.
	test := "^" + strings.ReplaceAll(t.Name(), "/", "$/^") + "$"
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if sch.Parallel {
				t.Parallel()
			}
			replay := fmt.Sprintf("go test -race -run '%s' %s -%s.seed=%d, or REWIND_TEST_SEED=%d",
				test, s.Package, sch.Flags.prefix, seed, seed)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d; replay with: %s", seed, replay)
				}
			})
			d := sch.Draw(seed)
			what := fmt.Sprintf("%s seed %d (%s; replay with -%s.seed=%d)", s.Executor.Name(), seed, d.What, sch.Flags.prefix, seed)
			crashes := CheckCrashes
			if sch.Coalesce {
				crashes = CheckCoalescedCrashes
			}
			d.Run(t).Judge(t, what, crashes)
		})
	}
}

// CheckCrashes judges the crash bill of a run of injected faults: every
// fault that fired is one crash in the summary, and every crash has its
// recovery.
func CheckCrashes(t testing.TB, what string, o Outcome) {
	t.Helper()
	fired := len(o.Env.Faults.Fired)
	if o.Summary.Crashes != fired || len(o.Summary.Recoveries) != fired {
		t.Fatalf("%s: %d faults fired, the summary reports %d crashes and %d recoveries",
			what, fired, o.Summary.Crashes, len(o.Summary.Recoveries))
	}
}

// CheckCoalescedCrashes judges the crash bill of a run whose faults may
// join a crash still being detected: every crash has its recovery, and
// there is at least one crash when a fault fired and no more crashes than
// faults fired.
func CheckCoalescedCrashes(t testing.TB, what string, o Outcome) {
	t.Helper()
	fired, crashes := len(o.Env.Faults.Fired), o.Summary.Crashes
	if len(o.Summary.Recoveries) != crashes || crashes > fired || (fired > 0 && crashes == 0) {
		t.Fatalf("%s: %d faults fired, the summary reports %d crashes and %d recoveries",
			what, fired, crashes, len(o.Summary.Recoveries))
	}
}
