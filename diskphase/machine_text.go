package diskphase

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/operator"
)

// One readable line per event and action, for traces and the data-driven
// machine tests (testdata/machine).

func (evStarted) String() string { return "Started" }

func (e evPlanPersisted) String() string { return fmt.Sprintf("PlanPersisted job=%d", e.Job) }

func (e evAttemptSucceeded) String() string {
	return fmt.Sprintf("AttemptSucceeded %s attempt=%d", e.Unit, e.Attempt) + entrySummary(e.Map, e.Reduce)
}

func (e evAttemptCrashed) String() string {
	return fmt.Sprintf("AttemptCrashed %s attempt=%d worker=%d", e.Unit, e.Attempt, e.Worker)
}

func (e evWorkerLost) String() string { return fmt.Sprintf("WorkerLost worker=%d", e.Worker) }
func (e evWorkerUp) String() string   { return fmt.Sprintf("WorkerUp worker=%d", e.Worker) }

func (e evFileBad) String() string {
	return fmt.Sprintf("FileBad %s attempt=%d producer=%s file=%s", e.Unit, e.Attempt, e.Producer, e.File)
}

func (e evLedgerRecorded) String() string {
	return fmt.Sprintf("LedgerRecorded %s attempt=%d", e.Unit, e.Attempt)
}

func (e evCommitted) String() string { return fmt.Sprintf("Committed job=%d", e.Job) }

func (e evCommitFileBad) String() string {
	return fmt.Sprintf("CommitFileBad job=%d producer=%s file=%s", e.Job, e.Producer, e.File)
}

func (e evAttemptFailed) String() string {
	return fmt.Sprintf("AttemptFailed %s attempt=%d: %v", e.Unit, e.Attempt, e.Err)
}

func (a actPersistPlan) String() string {
	p := a.Plan
	return fmt.Sprintf("PersistPlan job=%d starts=%v ends=%v eof=%v", p.Job, p.Starts, p.Ends, p.EOF)
}

func (a actRun) String() string {
	s := fmt.Sprintf("Run %s attempt=%d worker=%d", a.Unit, a.Attempt, a.Worker)
	if t := a.Map; t != nil {
		s += fmt.Sprintf(" range=[%d,%s)", t.Start, openEnd(t.End))
		if t.KnownEOF {
			s += " known-eof"
		}
	}
	if t := a.Reduce; t != nil {
		ins := make([]string, len(t.Inputs))
		for i, in := range t.Inputs {
			ins[i] = fileName(in.File)
		}
		s += " inputs=" + strings.Join(ins, ",")
		if t.StateIn != nil {
			s += fmt.Sprintf(" state-in=%s from=%s", fileName(*t.StateIn), t.StateProducer)
		}
		s += " wm=" + watermark(t.PrevWM) + ".." + watermark(t.WM)
		if t.StateOnly {
			s += " state-only"
		}
	}
	return s
}

func (a actRecord) String() string {
	return fmt.Sprintf("Record %s attempt=%d", a.Unit, a.Attempt) + entrySummary(a.Map, a.Reduce)
}

func (a actReplaceWorker) String() string { return fmt.Sprintf("ReplaceWorker worker=%d", a.Worker) }
func (a actPhase) String() string         { return fmt.Sprintf("Phase job=%d reduce", a.Job) }

func (a actCommit) String() string {
	parts := make([]string, len(a.Parts))
	for i, p := range a.Parts {
		parts[i] = fmt.Sprintf("%d:%s", p.Subtask, fileName(p.File))
	}
	c := a.Commit
	return fmt.Sprintf("Commit job=%d attempt=%d parts=%s ends=%v eof=%v records=%d rows-out=%d",
		a.Job, a.Attempt, strings.Join(parts, ","), c.Ends, c.EOF, c.Records, c.RowsOut)
}

func (a actCollect) String() string { return fmt.Sprintf("Collect job=%d", a.Job) }
func (actDone) String() string      { return "Done" }
func (a actFail) String() string    { return "Fail: " + a.Err.Error() }

// entrySummary prints the ledger entry an event or action carries.
func entrySummary(m *MapEntry, r *ReduceEntry) string {
	switch {
	case m != nil:
		return " " + m.summary()
	case r != nil:
		return " " + r.summary()
	}
	return ""
}

func (e *MapEntry) summary() string {
	files := make([]string, len(e.Files))
	for i, f := range e.Files {
		files[i] = fileName(f)
	}
	s := fmt.Sprintf("map(range=[%d,%d) records=%d", e.Start, e.End, e.Records)
	if e.EOF {
		s += " eof"
	}
	return s + " files=" + strings.Join(files, ",") + ")"
}

func (e *ReduceEntry) summary() string {
	s := "reduce(out=" + fileName(e.Out)
	if e.State != nil {
		s += " state=" + fileName(*e.State)
	}
	if e.Rebuilt {
		s += " rebuilt"
	}
	return s + ")"
}

// fileName prints a file reference; "-" is an empty table (no object),
// "+N" counts the chunks after the first.
func fileName(f FileRef) string {
	if f.Name == "" && len(f.More) == 0 {
		return "-"
	}
	if len(f.More) > 0 {
		return fmt.Sprintf("%s+%d", f.Name, len(f.More))
	}
	return f.Name
}

func watermark(wm int64) string {
	switch wm {
	case operator.NoWatermark:
		return "none"
	case operator.EndOfTime:
		return "end"
	}
	return fmt.Sprint(wm)
}

func openEnd(end int64) string {
	if end < 0 {
		return "open"
	}
	return fmt.Sprint(end)
}
