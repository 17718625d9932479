package microbatch

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestProtocolScripts runs the scripts in testdata/protocol: each command
// is one event fed to the machine (or "machine", a new coordinator), and
// the expected output is the actions it returns, one per line, then the
// state it is left in. Rewrite the expectations with -rewrite.
func TestProtocolScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/protocol", func(t *testing.T, path string) {
		var m *Machine
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "machine" {
				trigger := "100ms"
				d.MaybeScanArgs(t, "trigger", &trigger)
				m = NewMachine(scriptDuration(t, trigger))
				m.lateOffsets = d.HasArg("late-offsets")
				m.noAhead = d.HasArg("no-ahead")
				return scriptState(m)
			}
			if m == nil {
				d.Fatalf(t, "%s before machine", d.Cmd)
			}
			var b strings.Builder
			for _, a := range m.Step(scriptEvent(t, d)) {
				fmt.Fprintln(&b, a)
			}
			b.WriteString(scriptState(m))
			return b.String()
		})
	})
}

// scriptStart is the clock reading 00:00:00.000; script times are offsets
// from it.
var scriptStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func scriptDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}

// scriptNow reads now=DURATION (an offset from the start), or the zero
// time without it.
func scriptNow(t *testing.T, d *datadriven.TestData) time.Time {
	var s string
	if !d.MaybeScanArgs(t, "now", &s) {
		return time.Time{}
	}
	return scriptStart.Add(scriptDuration(t, s))
}

func scriptEvent(t *testing.T, d *datadriven.TestData) Event {
	now := scriptNow(t, d)
	switch d.Cmd {
	case "started":
		ev := Started{Now: now, LastCommitted: -1, Rerun: -1}
		d.MaybeScanArgs(t, "last-committed", &ev.LastCommitted)
		d.MaybeScanArgs(t, "rerun", &ev.Rerun)
		return ev
	case "tick":
		return Tick{Now: now}
	case "planned":
		return Planned{Empty: d.HasArg("empty"), Done: d.HasArg("done")}
	case "offsets-logged":
		return OffsetsLogged{}
	case "run-done":
		return RunDone{}
	case "state-committed":
		return StateCommitted{Now: now}
	case "sink-done":
		return SinkDone{Now: now}
	case "commit-logged":
		return CommitLogged{}
	case "published":
		return Published{Stop: d.HasArg("stop")}
	case "worker-lost":
		ev := WorkerLost{Now: now}
		if arg, ok := d.Arg("finished"); ok {
			for _, v := range arg.Vals {
				switch v {
				case "offsets-logged":
					ev.Finished = append(ev.Finished, OffsetsLogged{})
				case "commit-logged":
					ev.Finished = append(ev.Finished, CommitLogged{})
				default:
					d.Fatalf(t, "finished=%s: only offsets-logged and commit-logged", v)
				}
			}
		}
		return ev
	case "rebuilt":
		return Rebuilt{Now: now}
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return nil
}

func scriptState(m *Machine) string {
	return fmt.Sprintf("state=%s batch=%d committed=%d\n", m.State(), m.Batch(), m.Committed())
}
