package runtest

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// CheckResumedBill judges the summary of a resumed process (--resume) that
// had no crash of its own: the earlier process's death is its one crash,
// billed with report.CauseProcessDied and a restore time only (detection,
// reprocessing and catch-up are not observable from the new process);
// resumed_from names a recovery point of kind (none, covering no record,
// when point is false); and records_in plus resumed_from.records_before is
// the input read once, inputRecords.
func CheckResumedBill(t testing.TB, what string, s *report.Summary, kind string, point bool, inputRecords int64) {
	t.Helper()
	if s.Crashes != 1 || len(s.Recoveries) != 1 {
		t.Fatalf("%s: %d crashes, %d recoveries; want the earlier process's death alone", what, s.Crashes, len(s.Recoveries))
	}
	r := s.Recoveries[0]
	if r.Cause != report.CauseProcessDied {
		t.Fatalf("%s: recovery cause %q, want %q", what, r.Cause, report.CauseProcessDied)
	}
	if r.DetectMs != nil || r.ReprocessedRecords != nil || r.CatchUpMs != nil {
		t.Fatalf("%s: the earlier process's death has detect %v, reprocessed %v, catch-up %v; none is observable, want nulls",
			what, r.DetectMs, r.ReprocessedRecords, r.CatchUpMs)
	}
	if r.RestoreMs == nil || *r.RestoreMs < 0 {
		t.Fatalf("%s: restore_ms %v, want a measured time", what, r.RestoreMs)
	}
	rf := s.ResumedFrom
	if rf == nil {
		t.Fatalf("%s: resumed_from is null", what)
	}
	if rf.Kind != kind {
		t.Fatalf("%s: resumed from a %q, want a %q", what, rf.Kind, kind)
	}
	switch {
	case point && rf.ID == nil:
		t.Fatalf("%s: resumed_from.id is null; storage held a recovery point", what)
	case !point && rf.ID != nil:
		t.Fatalf("%s: resumed from %s %d; storage held none", what, kind, *rf.ID)
	case !point && rf.RecordsBefore != 0:
		t.Fatalf("%s: storage held nothing, yet resumed_from covers %d records", what, rf.RecordsBefore)
	case rf.RecordsBefore >= inputRecords:
		t.Fatalf("%s: resumed_from covers all %d records: the earlier process had finished, so nothing was resumed", what, rf.RecordsBefore)
	}
	if s.RecordsIn+rf.RecordsBefore != inputRecords {
		t.Fatalf("%s: records_in %d + resumed_from.records_before %d = %d, want the input once, %d",
			what, s.RecordsIn, rf.RecordsBefore, s.RecordsIn+rf.RecordsBefore, inputRecords)
	}
	t.Logf("%s: resumed from %s %v covering %d records, then read %d; restore %.2f ms",
		what, rf.Kind, ptrString(rf.ID), rf.RecordsBefore, s.RecordsIn, *r.RestoreMs)
}

func ptrString(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}

// CheckResumedEvent judges the progress lines of a resumed process: exactly
// one event of kind event carries report.CauseProcessDied, with a restore_ms
// and a resumed_from of kind.
func CheckResumedEvent(t testing.TB, what string, progress []byte, event, kind string) {
	t.Helper()
	found := 0
	for _, line := range bytes.Split(bytes.TrimSpace(progress), []byte("\n")) {
		var ev struct {
			Event       string              `json:"event"`
			Cause       string              `json:"cause"`
			RestoreMs   *float64            `json:"restore_ms"`
			ResumedFrom *report.ResumedFrom `json:"resumed_from"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("%s: progress line %q: %v", what, line, err)
		}
		if ev.Event != event || ev.Cause != report.CauseProcessDied {
			continue
		}
		found++
		if ev.RestoreMs == nil || ev.ResumedFrom == nil || ev.ResumedFrom.Kind != kind {
			t.Fatalf("%s: %s event %s: want restore_ms and resumed_from of kind %q", what, event, line, kind)
		}
	}
	if found != 1 {
		t.Fatalf("%s: %d %s events for the earlier process's death, want 1", what, found, event)
	}
}

// EventStop passes progress lines on to W (when set) and calls Stop once N
// lines containing every string of Match have passed: a test stops a run
// from outside at a recovery point, leaving storage as a process dying then
// would. Executors write one line per Write, one at a time.
type EventStop struct {
	W     io.Writer
	Match []string
	N     int
	Stop  func()
	seen  int
}

func (e *EventStop) Write(p []byte) (int, error) {
	all := true
	for _, m := range e.Match {
		all = all && bytes.Contains(p, []byte(m))
	}
	if all {
		if e.seen++; e.seen == e.N {
			e.Stop()
		}
	}
	if e.W == nil {
		return len(p), nil
	}
	return e.W.Write(p)
}
