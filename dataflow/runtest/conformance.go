package runtest

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Conformance runs the suite every executor passes, one group each:
// RandomCrashSchedules, ResumedProcessBillsTheEarlierDeath and
// RecoveryPointsFromAListing. Each executor's tests call it from one test
// with the Subject that states what differs for that executor.
func Conformance(t *testing.T, s Subject) {
	t.Run("RandomCrashSchedules", func(t *testing.T) { crashSchedules(t, s) })
	t.Run("ResumedProcessBillsTheEarlierDeath", func(t *testing.T) { resumedProcess(t, s) })
	t.Run("RecoveryPointsFromAListing", func(t *testing.T) { recoveryPoints(t, s) })
}

// Subject is an executor under the conformance suite: what differs between
// executors. The suite holds every executor to the same checks; the
// subject states only its own: the schedules it draws (its fail points and
// settings), how it dies and resumes, the names of its storage layout, and
// extra assertions.
type Subject struct {
	// Executor is the executor under test. The suite asks it for the
	// recovery points of a listing (it must be an inspect.Inspector) and names
	// it in messages.
	Executor run.Executor
	// Kind is what the executor calls a recovery point: resumed_from.kind
	// and inspect.RecoveryPoint.Kind ("batch", "finite job", "checkpoint").
	Kind string
	// Package is the executor's package as `go test` takes it
	// ("./microbatch/"), for the replay command of a failed schedule.
	Package string
	// Dir returns a fresh directory for storage or output.
	Dir func(t testing.TB) string

	// Schedules are the seeded random crash schedules.
	Schedules Schedules
	// Resume is the resumed-process bill.
	Resume Resume
	// Listing is the recovery-point listing.
	Listing Listing
}

// Result is a finished run as the executor's harness returns it: the
// outcome the suite judges, and the executor's own judgement.
type Result struct {
	Outcome
	// Check, if set, runs after the suite's checks: what only this
	// executor promises (protocol accounting, ledgers, leftovers).
	Check func(t testing.TB, what string)
}

// Judge is the suite's verdict on every finished run: the output is the
// reference's (CheckOutput), then the suite's other checks, then the
// executor's own (Check).
func (r Result) Judge(t testing.TB, what string, checks ...func(t testing.TB, what string, o Outcome)) {
	t.Helper()
	CheckOutput(t, what, r.Outcome)
	for _, c := range checks {
		c(t, what, r.Outcome)
	}
	if r.Check != nil {
		r.Check(t, what)
	}
}

// Resume describes the resumed-process bill of one executor.
type Resume struct {
	// Event is the progress event that bills the earlier process's death
	// ("recovery", "coordinator_restarted").
	Event string
	// Records is the number of records of the input the processes read.
	Records int64
	// Die runs a first process on storage and output that ends with its
	// run unfinished and at least one recovery point stored, as a process
	// dying would, and fails the test when it did not get that far.
	Die func(t *testing.T, storage, output string)
	// Resumed runs a --resume process (run.Config.Resumed) on storage and
	// output, writing its progress lines to progress (nil: nowhere). fresh
	// says storage and output are new and hold nothing.
	Resumed func(t *testing.T, storage, output string, progress io.Writer, fresh bool) Result
}

// resumedProcess: a process dies with its run unfinished (Resume.Die),
// and one resuming its run (run.Config.Resumed) bills the first's death as
// its one crash and says which recovery point it resumed from, and its
// records_in and that point's records add up to the input once; its
// progress lines bill the death once, and its output is the reference's. A
// resumed run whose storage holds nothing resumes from no recovery point,
// covering nothing, and its output is the reference's too.
func resumedProcess(t *testing.T, s Subject) {
	r := s.Resume
	if r.Die == nil || r.Resumed == nil || r.Event == "" || r.Records == 0 || s.Kind == "" {
		t.Fatalf("%s: the subject's Resume is incomplete", s.Executor.Name())
	}
	storage, output := "file://"+s.Dir(t), filepath.Join(s.Dir(t), "out")
	r.Die(t, storage, output)
	var progress bytes.Buffer
	what := s.Executor.Name() + ": resumed process"
	o := r.Resumed(t, storage, output, &progress, false)
	o.Judge(t, what)
	CheckResumedBill(t, what, o.Summary, s.Kind, true, r.Records)
	CheckResumedEvent(t, what, progress.Bytes(), r.Event, s.Kind)

	what = s.Executor.Name() + ": resumed process, empty storage"
	o = r.Resumed(t, "file://"+s.Dir(t), filepath.Join(s.Dir(t), "out"), nil, true)
	o.Judge(t, what)
	CheckResumedBill(t, what, o.Summary, s.Kind, false, r.Records)
}

// Listing is a storage listing in an executor's layout and the recovery
// points it holds.
type Listing struct {
	Objects []storage.Object
	Want    []WantPoint // in the order RecoveryPoints returns them
}

// WantPoint is one recovery point a listing must yield. Its executor and
// kind are the subject's.
type WantPoint struct {
	Run      string // "<job>/<run id>"
	ID       int64
	Complete bool
	Objects  int
	Bytes    int64
	Status   string // a part of the status, in the executor's own words
}

// recoveryPoints: the executor reads exactly the wanted recovery points
// from the listing (and nothing from objects of other runs, executors or
// layouts in it), each with its executor, kind, completeness, object
// count, size and status.
func recoveryPoints(t *testing.T, s Subject) {
	in, ok := s.Executor.(inspect.Inspector)
	if !ok {
		t.Fatalf("%s: the executor cannot read a listing (not an inspect.Inspector)", s.Executor.Name())
	}
	if len(s.Listing.Want) == 0 {
		t.Fatalf("%s: the subject's Listing wants no recovery point", s.Executor.Name())
	}
	CheckRecoveryPoints(t, s.Executor.Name(), s.Kind, in.RecoveryPoints(s.Listing.Objects), s.Listing.Want)
}

// CheckRecoveryPoints judges the recovery points an executor read from a
// listing against the wanted ones, in order.
func CheckRecoveryPoints(t testing.TB, executor, kind string, got []inspect.RecoveryPoint, want []WantPoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d recovery points, want %d: %+v", executor, len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Executor != executor || g.Kind != kind || g.Run != w.Run || g.ID != w.ID || g.Complete != w.Complete ||
			g.Objects != w.Objects || g.Bytes != w.Bytes || !strings.Contains(g.Status, w.Status) {
			t.Errorf("%s: recovery point %d is %+v, want executor %s, kind %s and %+v", executor, i, g, executor, kind, w)
		}
	}
}
