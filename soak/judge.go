package soak

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Verdict is what a schedule came to.
type Verdict int

const (
	// OK: the run recovered and its output equals the reference's.
	OK Verdict = iota
	// Detected: after damage to a durable file the run stopped with exit
	// 1 and an error line naming the file.
	Detected
	// Silent: after damage the run exited 0 with a result other than the
	// reference's. A failure.
	Silent
	// Failure: anything else: a wrong result without damage, a panic, a
	// hang, exit 2 on a runtime problem, a runtime error not naming the
	// damaged file or with nothing damaged.
	Failure
)

func (v Verdict) String() string {
	return [...]string{"ok", "detected", "SILENT", "FAILURE"}[v]
}

// Failed says whether the verdict fails the campaign.
func (v Verdict) Failed() bool { return v == Silent || v == Failure }

// Outcome is what the last process of a schedule left, as the judge needs
// it.
type Outcome struct {
	Proc    ProcResult
	Damaged []Damaged // damage done during the schedule, in order
	// Wrong, for an exit 0, says how the output differs from the
	// reference's or breaks the sink mode's promise ("" if it does not).
	Wrong string
}

// Classify judges a schedule by its last process.
func Classify(o Outcome) (Verdict, string) {
	p := o.Proc
	switch {
	case p.TimedOut:
		return Failure, "hang: still running at the time limit (killed)"
	case p.Panicked():
		return Failure, "crashed with a Go trace: " + firstPanicLine(p.Stderr)
	case p.Exit == 0 && o.Wrong != "" && len(o.Damaged) > 0:
		return Silent, fmt.Sprintf("exit 0 after %s, but %s", o.Damaged[len(o.Damaged)-1], o.Wrong)
	case p.Exit == 0 && o.Wrong != "":
		return Failure, "wrong result with exit 0: " + o.Wrong
	case p.Exit == 0 && len(o.Damaged) > 0:
		return OK, "recovered from " + o.Damaged[len(o.Damaged)-1].String()
	case p.Exit == 0:
		return OK, "equal to the reference"
	case p.Exit == 1 && len(o.Damaged) > 0:
		lines := p.Lines()
		for _, d := range o.Damaged {
			if d.NamedIn(lines) {
				return Detected, fmt.Sprintf("%s: %s", d, p.ErrorLine())
			}
		}
		return Failure, fmt.Sprintf("exit 1 after %s, and no line names the file: %q", o.Damaged[len(o.Damaged)-1], p.ErrorLine())
	case p.Exit == 1:
		return Failure, fmt.Sprintf("runtime error with nothing damaged: %q", p.ErrorLine())
	case p.Exit == 2:
		what := "a runtime problem"
		if len(o.Damaged) > 0 {
			what = o.Damaged[len(o.Damaged)-1].String()
		}
		return Failure, fmt.Sprintf("exit 2 (the usage-error code) after %s: %q", what, p.ErrorLine())
	case p.Signal != "":
		return Failure, fmt.Sprintf("died of %s unasked", p.Signal)
	}
	return Failure, fmt.Sprintf("exit %d: %q", p.Exit, p.ErrorLine())
}

var panicLine = regexp.MustCompile(`(?m)^(panic|fatal error): .*$`)

func firstPanicLine(s string) string {
	if m := panicLine.FindString(s); m != "" {
		return m
	}
	return "a goroutine trace on stderr"
}

// Summary is the part of the --summary json a judge reads.
type Summary struct {
	RunID             string `json:"run_id"`
	Resumed           bool   `json:"resumed"`
	ResolvedRows      int64  `json:"resolved_rows"`
	SinkDuplicateRows int64  `json:"sink_duplicate_rows"`
	SinkConflicting   int64  `json:"sink_conflicting_rows"`
	LostRecords       int64  `json:"lost_records"`
	Crashes           int    `json:"crashes"`
	Recoveries        []any  `json:"recoveries"`
	UnfiredFaults     []any  `json:"unfired_faults"`
}

// ParseSummary reads the JSON summary, the last line of standard output.
func ParseSummary(stdout string) (*Summary, error) {
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	var s Summary
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &s); err != nil {
		return nil, fmt.Errorf("the last line of stdout is not the JSON summary: %v", err)
	}
	return &s, nil
}
