package diskphase

// This file turns the coordinator's own trace points (traceEvent) into
// the time-space events a diagram draws (run.Env.Trace): a lane per
// worker, on which its units are boxes, and one for the coordinator,
// which writes the ledger and commits the finite jobs.

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

const coordinatorLane = "coordinator"

func workerLane(w int) string { return fmt.Sprintf("worker-%d", w) }

// declareLanes adds the workers' lanes and the coordinator's.
func declareLanes(tr *spacetime.Recorder, workers int) {
	if tr == nil {
		return
	}
	for w := 0; w < workers; w++ {
		tr.AddLane(spacetime.Lane{ID: workerLane(w), Kind: "unit", Worker: w, Label: fmt.Sprintf("worker %d", w)})
	}
	tr.AddLane(spacetime.Lane{ID: coordinatorLane, Kind: "coordinator", Worker: -1, Label: "coordinator"})
}

// unitNote is map or reduce, with the unit's name.
func unitNote(u UnitID) string {
	if u.Kind == kindMap {
		return "map " + u.String()
	}
	return "reduce " + u.String()
}

// record adds the diagram's event for one trace point, if it has one.
func record(tr *spacetime.Recorder, ev traceEvent) {
	e := spacetime.Event{Worker: ev.Worker, ID: int64(ev.Unit.Job)}
	switch ev.Kind {
	case "start":
		e.Kind, e.Lane, e.Note, e.Rerun = spacetime.UnitStart, workerLane(ev.Worker), unitNote(ev.Unit), ev.Rerun
	case "ended":
		e.Kind, e.Lane, e.Note = spacetime.UnitEnd, workerLane(ev.Worker), unitNote(ev.Unit)
		if ev.Detail != "ok" {
			e.Note += ": " + ev.Detail
		}
	case "recorded":
		e.Kind, e.Lane, e.Worker, e.Note = spacetime.Ledger, coordinatorLane, -1, unitNote(ev.Unit)
	case "committed":
		e.Kind, e.Lane, e.Worker, e.ID = spacetime.Commit, coordinatorLane, -1, int64(ev.Job)
	case "crash":
		who := fmt.Sprintf("worker %d", ev.Worker)
		if ev.Worker < 0 {
			who = "the coordinator"
		}
		e.Kind, e.ID, e.Note = spacetime.Crash, 0, fmt.Sprintf("%s killed (%s)", who, ev.Detail)
	case "restart":
		// A new coordinator reads the ledger back; finished units are
		// not run again. There is no recovery point id: -1.
		e.Kind, e.Lane, e.Worker, e.ID, e.Note = spacetime.Restore, coordinatorLane, -1, -1, "new coordinator read the ledger"
	default:
		return
	}
	tr.Add(ev.At, e)
}

// traceEvent lets tests watch the run.
type traceEvent struct {
	Kind    string // start, ended, recorded, interrupted, abandoned, lost, crash, committed, restart
	Unit    UnitID
	Attempt int
	Worker  int
	Rerun   bool
	Job     int
	Detail  string
	At      time.Time
}

func (x *execution) tracef(ev traceEvent) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	if x.trace != nil {
		x.trace(ev)
	}
	if tr := x.env.Trace; tr != nil {
		record(tr, ev)
	}
}
