package bench

import (
	"fmt"
	"strings"
)

// FaultFired says whether a run asked to crash did crash: it was given a
// fault and either its summary lists it as unfired or it has no bill at
// all. A run without a fault counts as fired (there is nothing to miss).
func (r *RunResult) FaultFired() bool {
	if r.Fault == "" || r.FaultAtMs == nil {
		return true
	}
	if r.Summary != nil {
		return len(r.Summary.UnfiredFaults) == 0 && len(r.Summary.Recoveries) > 0
	}
	return r.Figures.DetectMs != nil || r.Figures.RestoreMs != nil
}

// RunName names one run in problems and verdicts: contestant, sweep point
// and repeat (counted from 1, as people count).
func (r *RunResult) RunName() string {
	name := r.Contestant
	if r.SweepPoint != "" {
		name += " @" + r.SweepPoint
	}
	return fmt.Sprintf("%s #%d", name, r.Repeat+1)
}

// Verdict is the run's check against the reference: whether it passed,
// and if not, in a few words why (the run's error, or how its output
// differs).
func (r *RunResult) Verdict() (ok bool, detail string) {
	switch {
	case r.Error != "":
		return false, "failed: " + oneLine(r.Error)
	case !r.Correct:
		return false, oneLine(r.Diff)
	}
	return true, ""
}

// Problems are one line per thing that makes a run's figures doubtful or
// wrong: a failed run, a wrong result, a fault that struck before steady
// state, a fault that never fired. Empty when there is none.
func (r *Results) Problems() []string {
	var out []string
	for i := range r.Runs {
		run := &r.Runs[i]
		if ok, detail := run.Verdict(); !ok {
			if run.Error == "" {
				detail = strings.TrimSuffix("differs from the reference: "+detail, ": ")
			}
			out = append(out, run.RunName()+": "+detail)
		}
		if run.Error != "" {
			continue
		}
		if run.Fault != "" && run.FaultAtMs != nil && !run.SteadyState {
			out = append(out, fmt.Sprintf("%s: not in steady state at the fault: %d recovery point(s) after the warm-up, 2 needed",
				run.RunName(), run.PointsBeforeFault))
		}
		if !run.FaultFired() {
			out = append(out, fmt.Sprintf("%s: the fault %s never fired, so the run has no bill", run.RunName(), run.Fault))
		}
	}
	return out
}

// oneLine keeps a multi-line message to its first line, so a table stays
// a table; the files have the rest.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
