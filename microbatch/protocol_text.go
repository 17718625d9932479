package microbatch

import (
	"fmt"
	"strings"
	"time"
)

// One readable line per event and action, for traces and the data-driven
// protocol tests (testdata/protocol). Times print as a clock reading; a
// zero time is left out.

func clock(t time.Time) string { return t.Format("15:04:05.000") }

func withNow(name string, now time.Time) string {
	if now.IsZero() {
		return name
	}
	return name + " now=" + clock(now)
}

func (e Started) String() string {
	return fmt.Sprintf("Started now=%s last-committed=%d rerun=%d", clock(e.Now), e.LastCommitted, e.Rerun)
}

func (e Tick) String() string { return "Tick now=" + clock(e.Now) }

func (e Planned) String() string {
	switch {
	case e.Done:
		return "Planned done"
	case e.Empty:
		return "Planned empty"
	}
	return "Planned"
}

func (OffsetsLogged) String() string    { return "OffsetsLogged" }
func (RunDone) String() string          { return "RunDone" }
func (e StateCommitted) String() string { return withNow("StateCommitted", e.Now) }
func (e SinkDone) String() string       { return withNow("SinkDone", e.Now) }
func (CommitLogged) String() string     { return "CommitLogged" }

func (e Published) String() string {
	if e.Stop {
		return "Published stop"
	}
	return "Published"
}

func (e WorkerLost) String() string {
	s := "WorkerLost now=" + clock(e.Now)
	if len(e.Finished) > 0 {
		names := make([]string, len(e.Finished))
		for i, f := range e.Finished {
			names[i] = fmt.Sprint(f)
		}
		s += " finished=(" + strings.Join(names, ", ") + ")"
	}
	return s
}

func (e Rebuilt) String() string { return "Rebuilt now=" + clock(e.Now) }

func (a WaitUntil) String() string { return "WaitUntil at=" + clock(a.At) }
func (a Point) String() string     { return "Point " + a.Name }

func (a Plan) String() string {
	if a.Ahead {
		return fmt.Sprintf("Plan batch=%d ahead", a.Batch)
	}
	return fmt.Sprintf("Plan batch=%d", a.Batch)
}

func (a LogOffsets) String() string { return fmt.Sprintf("LogOffsets batch=%d", a.Batch) }

func (a Run) String() string {
	if a.Rerun {
		return fmt.Sprintf("Run batch=%d rerun", a.Batch)
	}
	return fmt.Sprintf("Run batch=%d", a.Batch)
}

func (a FlushSink) String() string   { return fmt.Sprintf("FlushSink batch=%d", a.Batch) }
func (a CommitState) String() string { return fmt.Sprintf("CommitState batch=%d", a.Batch) }
func (a LogCommit) String() string   { return fmt.Sprintf("LogCommit batch=%d", a.Batch) }
func (a Publish) String() string     { return fmt.Sprintf("Publish batch=%d", a.Batch) }

func (a Rebuild) String() string {
	s := "Rebuild"
	if a.Rollback {
		s += " rollback"
	}
	return s + fmt.Sprintf(" last-committed=%d failed=%d discarded=%d ahead=%d", a.LastCommitted, a.Failed, a.Discarded, a.Ahead)
}

func (Finish) String() string { return "Finish" }
func (a Fail) String() string { return "Fail: " + a.Err.Error() }
