package microbatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// The fallback tests stop a run for good in the middle of batch crashBatch
// (after its sink flush: batches up to crashBatch-1 are committed and, for
// a transactional sink, published), damage one durable object of the
// newest committed batch, and resume. Storage is a local directory, so an
// object is damaged through its file.

const (
	fbRecords    = 1200
	fbBatch      = 40 // records per batch: few key groups change per batch, so deltas stay small
	fbCrashBatch = 9
	fbRunID      = "fallback"
)

// damage says which object of the listing to damage. It returns the
// object's name (relative to the run's prefix) and the oldest batch the
// restart may resume from: the fallback must go at least that far back.
type damage func(t *testing.T, st storage.Store, prefix string, l Listing) (name string, resumeAtMost int64)

// also damages more objects besides the one a damage picks.
type also func(l Listing) []string

// fbRun is one fallback scenario: a first process, a damage, a resume.
type fbRun struct {
	job         string
	mode        sink.Mode
	parallelism [2]int // first, second process (0: 2)
	retained    int
	fullEvery   int
}

func (r fbRun) opts() Options {
	o := Options{MaxBatchRecords: fbBatch, RunID: fbRunID, RetainedBatches: cmpOr(r.retained, 30), FullSnapshotEvery: cmpOr(r.fullEvery, 100)}
	// Long delta chains: the damage in their middle is what is tested.
	o.hooks.fullAfterDeltas = 1000
	return o
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// crashThenDamage runs the first process until it dies in batch
// fbCrashBatch, damages the object d picks and returns the second
// process's scenario (not run) and the damaged object.
func (r fbRun) crashThenDamage(t *testing.T, d damage, ledger *batchLedger) (*scenario, string, int64) {
	return r.crashThenDamageMore(t, d, nil, ledger)
}

func (r fbRun) crashThenDamageMore(t *testing.T, d damage, more also, ledger *batchLedger) (*scenario, string, int64) {
	t.Helper()
	storageURL := "file://" + fastDir(t)
	output := filepath.Join(fastDir(t), "out")
	inputs := defaultInputs(r.job, fbRecords, 11)
	first := &scenario{job: r.job, inputs: inputs, storage: storageURL, output: output, mode: r.mode,
		parallelism: r.parallelism[0], opts: r.opts(), ledger: ledger,
		fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: fbCrashBatch + 1}}}
	first.opts.hooks.noRestart = true
	if o := first.execute(t); o.err == nil {
		t.Fatal("first process: want the injected crash to end it")
	}
	st, err := storage.Open(context.Background(), storageURL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prefix := runPrefix(r.job, fbRunID)
	l := listRun(t, storageURL, r.job, fbRunID)
	if n := len(l.Commits); n == 0 || l.Commits[n-1] != fbCrashBatch-1 {
		t.Fatalf("after the crash in batch %d: commits %v, want the newest to be %d", fbCrashBatch, l.Commits, fbCrashBatch-1)
	}
	name, atMost := d(t, st, prefix, l)
	names := []string{name}
	if more != nil {
		names = append(names, more(l)...)
	}
	for _, n := range names {
		corruptFile(t, storageURL, prefix+n)
		// The damage must be what storage reports as corrupt, not a
		// missing object or a decode error of a valid one.
		if _, err := st.Get(context.Background(), prefix+n); !errors.Is(err, storage.ErrCorrupt) {
			t.Fatalf("reading %s after damaging it: %v, want %v", n, err, storage.ErrCorrupt)
		}
	}
	second := &scenario{job: r.job, inputs: inputs, storage: storageURL, output: output, mode: r.mode,
		parallelism: r.parallelism[1], opts: r.opts(), ledger: ledger, resumed: true}
	return second, name, atMost
}

// corruptFile damages the file of one object of a local store: it flips
// one byte in the middle of the payload, or, for every other object
// damaged, truncates the file to half, as a torn copy would.
func corruptFile(t *testing.T, storageURL, name string) {
	t.Helper()
	path := filepath.Join(strings.TrimPrefix(storageURL, "file://"), filepath.FromSlash(name))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("damaging %s: %v", name, err)
	}
	if len(data) < 4 {
		t.Fatalf("damaging %s: only %d bytes", name, len(data))
	}
	if len(name)%2 == 0 {
		data[len(data)/3] ^= 0x5a
	} else {
		data = data[:len(data)/2]
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readManifestFile(t *testing.T, st storage.Store, prefix string, v int64) *manifestEntry {
	t.Helper()
	data, err := st.Get(context.Background(), prefix+manifestName(v))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readCommitFile(t *testing.T, st storage.Store, prefix string, n int64) *commitEntry {
	t.Helper()
	data, err := st.Get(context.Background(), prefix+commitName(n))
	if err != nil {
		t.Fatal(err)
	}
	e, err := decodeCommit(data)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newest(l Listing) int64 { return l.Commits[len(l.Commits)-1] }

// The damages that a restart falls back past.
var fallbackDamages = map[string]damage{
	"commit": func(t *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
		return commitName(newest(l)), newest(l) - 1
	},
	"manifest": func(t *testing.T, st storage.Store, prefix string, l Listing) (string, int64) {
		c := readCommitFile(t, st, prefix, newest(l))
		if c.StateVersion != newest(l) {
			t.Fatalf("batch %d names state version %d: the job should change state in every batch", newest(l), c.StateVersion)
		}
		return manifestName(c.StateVersion), c.StateVersion - 1
	},
	// A delta of the newest version: only the newest manifest needs it.
	"state-newest": func(t *testing.T, st storage.Store, prefix string, l Listing) (string, int64) {
		v := readCommitFile(t, st, prefix, newest(l)).StateVersion
		objs := l.StateObjects[v]
		if len(objs) == 0 {
			t.Fatalf("no state objects of version %d", v)
		}
		return objs[0], v - 1
	},
	// A delta in the middle of the chain: the newest manifest still takes
	// some key groups from an older version, so every version from that
	// one on needs it, and the restart falls back to the batch before it.
	"state-middle": func(t *testing.T, st storage.Store, prefix string, l Listing) (string, int64) {
		v := readCommitFile(t, st, prefix, newest(l)).StateVersion
		m := readManifestFile(t, st, prefix, v)
		if m.Full {
			t.Fatalf("version %d is a full snapshot; the test wants a delta chain", v)
		}
		var older []string
		for _, refs := range m.Stages {
			for _, r := range refs {
				if ov, _ := parseID(r.Object[len(dirState):]); ov > 0 && ov < v {
					older = append(older, r.Object)
				}
			}
		}
		if len(older) == 0 {
			t.Fatalf("manifest %d takes no key group from an older delta; the test cannot damage the middle of the chain", v)
		}
		// The oldest such delta, so the restart falls back several
		// batches.
		slices.Sort(older)
		obj := older[0]
		ov, _ := parseID(obj[len(dirState):])
		t.Logf("damaging %s, a delta the manifest of version %d still needs", obj, v)
		return obj, ov - 1
	},
}

// TestFallbackPastDamagedNewestBatch: for each kind of object of the
// newest committed batch (its commit entry, its manifest, a state object
// of the newest version, a state object in the middle of the delta chain),
// damaged while the run is down, the resumed run falls back to an older
// committed batch, runs the later ones again from their logged offsets and
// ends equal to the oracle, under every sink mode: no duplicate for
// idempotent and transactional (the transactional sink had already
// published the batches run again), and every re-delivered batch holds
// exactly the rows of its first delivery. The summary says what was fallen
// back past.
func TestFallbackPastDamagedNewestBatch(t *testing.T) {
	for _, kind := range []string{"commit", "manifest", "state-newest", "state-middle"} {
		for _, mode := range []sink.Mode{sink.Append, sink.Idempotent, sink.Transactional} {
			t.Run(fmt.Sprintf("%s/%s", kind, mode), func(t *testing.T) {
				t.Parallel()
				ledger := newBatchLedger()
				r := fbRun{job: "keyed-count", mode: mode}
				second, name, atMost := r.crashThenDamage(t, fallbackDamages[kind], ledger)
				o := second.execute(t)
				o.check(t, "resumed past "+name)
				checkLedger(t, ledger, true)
				from := o.summary.ResumedFrom
				if from == nil || from.ID == nil || *from.ID > atMost {
					t.Fatalf("resumed from %+v, want a batch at most %d (before the damaged %s)", from, atMost, name)
				}
				note := fallbackNote(o.summary)
				if !strings.Contains(note, fmt.Sprintf("batch %d could not be restored", fbCrashBatch-1)) || !strings.Contains(note, name) {
					t.Fatalf("summary notes %q: want one saying batch %d could not be restored, naming %s", o.summary.Notes, fbCrashBatch-1, name)
				}
				if mode == sink.Append && o.stats.DuplicateRows == 0 {
					t.Fatalf("append: batches ran again after the fallback, yet no duplicate is visible")
				}
			})
		}
	}
}

// TestFallbackEventTime: the same with an event-time job, whose re-run
// batches must deliver their logged watermarks again.
func TestFallbackEventTime(t *testing.T) {
	for _, kind := range []string{"commit", "state-newest"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ledger := newBatchLedger()
			r := fbRun{job: "windowed-sum", mode: sink.Transactional}
			second, name, atMost := r.crashThenDamage(t, fallbackDamages[kind], ledger)
			o := second.execute(t)
			o.check(t, "resumed past "+name)
			// Windows fire only in some batches, so a re-run batch may
			// deliver no row: no re-delivery is required here.
			checkLedger(t, ledger, false)
			if from := o.summary.ResumedFrom; from == nil || from.ID == nil || *from.ID > atMost {
				t.Fatalf("resumed from %+v, want a batch at most %d", from, atMost)
			}
		})
	}
}

func checkLedger(t *testing.T, l *batchLedger, redelivered bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mismatch) > 0 {
		t.Fatalf("re-delivered batches differ from their first delivery: %v", l.mismatch)
	}
	if redelivered && l.redeliver == 0 {
		t.Fatalf("no batch was delivered again: the fallback did not happen")
	}
}

func fallbackNote(s *report.Summary) string {
	for _, n := range s.Notes {
		if strings.Contains(n, "could not be restored") || strings.Contains(n, "could not be read") {
			return n
		}
	}
	return ""
}

// TestFallbackRefusals: what cannot be fallen back past ends the resume
// with one line naming the damaged object. The offsets entry of the newest
// committed batch: an older batch would have to run it again from those
// offsets. The offsets entry of the logged, uncommitted batch under a sink
// that may already hold its rows (append, idempotent). Every retained
// commit entry damaged (retention keeps two).
func TestFallbackRefusals(t *testing.T) {
	for _, c := range []struct {
		name     string
		mode     sink.Mode
		retained int
		d        damage
		more     also
	}{
		{"offsets-committed", sink.Idempotent, 0, func(_ *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
			return offsetsName(newest(l)), -1
		}, nil},
		{"offsets-uncommitted-append", sink.Append, 0, func(_ *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
			return offsetsName(newest(l) + 1), -1
		}, nil},
		{"offsets-uncommitted-idempotent", sink.Idempotent, 0, func(_ *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
			return offsetsName(newest(l) + 1), -1
		}, nil},
		{"every-commit", sink.Transactional, 2, func(t *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
			// Retention runs in the background, so a crash can leave one
			// more entry than it keeps: every listed entry is damaged.
			if len(l.Commits) < 2 {
				t.Fatalf("retention keeps 2 commit entries, the listing has %v", l.Commits)
			}
			return commitName(newest(l)), -1
		}, func(l Listing) []string {
			var older []string
			for _, c := range l.Commits {
				if c != newest(l) {
					older = append(older, commitName(c))
				}
			}
			return older
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := fbRun{job: "keyed-count", mode: c.mode, retained: c.retained}
			second, name, _ := r.crashThenDamageMore(t, c.d, c.more, nil)
			o := second.execute(t)
			if o.err == nil {
				t.Fatalf("resumed with %s damaged: want a refusal", name)
			}
			msg := o.err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, name) || !strings.Contains(msg, "cannot be resumed") {
				t.Fatalf("refusal %q: want one line naming %s and saying the run cannot be resumed", msg, name)
			}
			t.Logf("refused: %s", msg)
			if errors.As(o.err, new(run.RefusedError)) {
				t.Fatalf("refusal %q is a usage error; damage is a runtime error", msg)
			}
		})
	}
}

// TestFallbackUncommittedOffsetsTransactional: under a transactional sink,
// the logged batch that was never committed has nothing visible, so a
// damaged offsets entry of it is planned anew and the result is exact.
func TestFallbackUncommittedOffsetsTransactional(t *testing.T) {
	r := fbRun{job: "keyed-count", mode: sink.Transactional}
	second, name, _ := r.crashThenDamage(t, func(_ *testing.T, _ storage.Store, _ string, l Listing) (string, int64) {
		return offsetsName(newest(l) + 1), -1
	}, nil)
	o := second.execute(t)
	o.check(t, "resumed with "+name+" damaged")
	if note := fallbackNote(o.summary); !strings.Contains(note, name) || !strings.Contains(note, "planned anew") {
		t.Fatalf("summary notes %q: want one saying %s could not be read and the batch is planned anew", o.summary.Notes, name)
	}
}

// TestFallbackRefusesFewerSubtasksForPublishedEpochs: a transactional sink
// publishes an epoch as one file per subtask. Falling back past published
// epochs at a lower parallelism would leave the files of the subtasks that
// are gone visible beside the re-run's: that is refused (a usage error, it
// is the user's to change), and at a higher parallelism the result is
// exact.
func TestFallbackRefusesFewerSubtasksForPublishedEpochs(t *testing.T) {
	for _, c := range []struct {
		from, to int
		refused  bool
	}{{3, 1, true}, {2, 3, false}} {
		t.Run(fmt.Sprintf("%d-to-%d", c.from, c.to), func(t *testing.T) {
			t.Parallel()
			r := fbRun{job: "keyed-count", mode: sink.Transactional, parallelism: [2]int{c.from, c.to}}
			second, name, _ := r.crashThenDamage(t, fallbackDamages["commit"], nil)
			o := second.execute(t)
			if !c.refused {
				o.check(t, fmt.Sprintf("resumed past %s at parallelism %d", name, c.to))
				return
			}
			if !errors.As(o.err, new(run.RefusedError)) || !strings.Contains(o.err.Error(), fmt.Sprintf("resume at parallelism %d", c.from)) {
				t.Fatalf("resumed past %s at parallelism %d: %v, want a refusal asking for parallelism %d", name, c.to, o.err, c.from)
			}
		})
	}
}

// TestFallbackSurvivesCrashesWhileReRunning: the restart falls back past a
// damaged delta in the middle of the chain, and crashes while it runs the
// later batches again. Inside the process, twice: each new coordinator
// falls back again from what is durable by then. Or for good, after the
// commit of the first batch run again: a third process resumes. The result
// is exact, and re-deliveries hold the rows of the first delivery.
func TestFallbackSurvivesCrashesWhileReRunning(t *testing.T) {
	for _, c := range []struct {
		name      string
		mode      sink.Mode
		fails     []fault.Spec
		noRestart bool
	}{
		{"in-process/idempotent", sink.Idempotent, []fault.Spec{{Worker: -1, Point: PointAfterState, Occurrence: 1}, {Worker: -1, Point: PointAfterCommit, Occurrence: 2}}, false},
		{"in-process/transactional", sink.Transactional, []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: 1}, {Worker: -1, Point: PointAfterCommit, Occurrence: 2}}, false},
		{"process/transactional", sink.Transactional, []fault.Spec{{Worker: -1, Point: PointAfterCommit, Occurrence: 1}}, true},
		{"process/append", sink.Append, []fault.Spec{{Worker: -1, Point: PointAfterCommit, Occurrence: 1}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ledger := newBatchLedger()
			r := fbRun{job: "keyed-count", mode: c.mode}
			second, name, _ := r.crashThenDamage(t, fallbackDamages["state-middle"], ledger)
			second.fails = c.fails
			second.opts.hooks.noRestart = c.noRestart
			o := second.execute(t)
			if c.noRestart {
				if o.err == nil {
					t.Fatalf("second process finished; want the crash in its first re-run batch to end it")
				}
				third := *second
				third.fails = nil
				third.opts.hooks.noRestart = false
				o = third.execute(t)
			} else if o.err == nil && len(o.summary.UnfiredFaults) > 0 {
				t.Fatalf("crashes %v never fired", o.summary.UnfiredFaults)
			}
			o.check(t, "resumed past "+name+" with crashes while re-running")
			checkLedger(t, ledger, true)
			// A third process finds the damaged object written again by
			// the re-run, and needs no fallback.
			if note := fallbackNote(o.summary); !c.noRestart && !strings.Contains(note, name) {
				t.Fatalf("summary notes %q: want one naming %s", o.summary.Notes, name)
			}
		})
	}
}
