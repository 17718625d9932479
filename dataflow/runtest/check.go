package runtest

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// Outcome is a finished run as CheckOutput judges it.
type Outcome struct {
	Err     error           // what the executor returned
	Env     *run.Env        // the run's environment: its config and job
	Summary *report.Summary // the executor's summary, completed by run.Finish
	Table   *sink.Table     // the output directory as sink.Resolve reads it
	Stats   sink.Stats      // what sink.Resolve counted
	Want    *Want           // the reference's answer (Oracle)
}

// CheckOutput judges a run of a re-readable source: it succeeded; the
// resolved output equals the oracle's; idempotent and transactional sinks
// show no duplicate or conflicting row; the summary's counts are those of
// resolving the output, and so are those of IndependentDuplicates; no record
// was lost; the late rows are the oracle's.
func CheckOutput(t testing.TB, what string, o Outcome) {
	t.Helper()
	if o.Err != nil {
		t.Fatalf("%s: run failed: %v", what, o.Err)
	}
	if d := o.Table.Diff(o.Want.Table, 10); d != "" {
		t.Fatalf("%s: resolved output differs from the oracle: %s", what, d)
	}
	mode := o.Env.Config.SinkMode
	if mode != sink.Append && o.Stats.DuplicateRows != 0 {
		t.Fatalf("%s: %s sink shows %d duplicate rows", what, mode, o.Stats.DuplicateRows)
	}
	if o.Summary.SinkDuplicateRows != o.Stats.DuplicateRows {
		t.Fatalf("%s: summary reports %d duplicates, resolving the output counts %d", what, o.Summary.SinkDuplicateRows, o.Stats.DuplicateRows)
	}
	if o.Summary.SinkConflictingRows != o.Stats.ConflictingRows {
		t.Fatalf("%s: summary reports %d conflicting rows, resolving the output counts %d", what, o.Summary.SinkConflictingRows, o.Stats.ConflictingRows)
	}
	if mode != sink.Append && o.Stats.ConflictingRows != 0 {
		t.Fatalf("%s: %s sink shows %d conflicting rows", what, mode, o.Stats.ConflictingRows)
	}
	dups, conflicts := IndependentDuplicates(t, o.Env.Config.Output, o.Env.Config.OutputFormat, o.Env.Job.Output)
	if dups != o.Stats.DuplicateRows || conflicts != o.Stats.ConflictingRows {
		t.Fatalf("%s: resolving reports %d duplicates and %d conflicting rows, counting visible files one by one finds %d and %d",
			what, o.Stats.DuplicateRows, o.Stats.ConflictingRows, dups, conflicts)
	}
	// Resolved again under a budget small enough to spill, so the external
	// sort is judged on every run's real output, not only on made-up rows.
	spilled, err := sink.ResolveEach(o.Env.Config.Output, o.Env.Job.Output, sink.ResolveOptions{MemoryBudget: 64 << 10, TempDir: t.TempDir()}, nil)
	if err != nil {
		t.Fatalf("%s: resolving the output under a 64 KiB budget: %v", what, err)
	}
	if spilled.VisibleRows != o.Stats.VisibleRows || spilled.ResolvedRows != o.Stats.ResolvedRows ||
		spilled.DuplicateRows != o.Stats.DuplicateRows || spilled.ConflictingRows != o.Stats.ConflictingRows {
		t.Fatalf("%s: resolving under a 64 KiB budget (%d runs spilled) counts %+v, in memory %+v", what, spilled.SpilledRuns, spilled, o.Stats)
	}
	if o.Summary.LostRecords != 0 {
		t.Fatalf("%s: %d records lost from a re-readable source", what, o.Summary.LostRecords)
	}
	if o.Summary.LateRows != o.Want.LateRows {
		t.Fatalf("%s: %d late rows, the oracle has %d", what, o.Summary.LateRows, o.Want.LateRows)
	}
}

// ReadBack reads a finished run's output directory back with sink.Resolve
// and, when want is set, returns the reference's answer for its
// configuration (Oracle) beside it.
func ReadBack(t testing.TB, env *run.Env, want bool) (*sink.Table, sink.Stats, *Want) {
	t.Helper()
	table, st, err := sink.Resolve(env.Config.Output, env.Job.Output)
	if err != nil {
		t.Fatalf("resolving output %s: %v", env.Config.Output, err)
	}
	if !want {
		return table, st, nil
	}
	return table, st, Oracle(t, env.Config)
}
