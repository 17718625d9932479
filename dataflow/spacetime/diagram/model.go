// Package diagram draws a spacetime recording as a time-space diagram:
// text lanes for a terminal, a self-contained SVG, an HTML page around it,
// and the raw lanes and events as JSON. Every renderer reads the same
// model, built once from the recording: lanes in a fixed order, and the
// intervals (blocking, replay, units, snapshots, dead time) paired from
// their start and end events.
package diagram

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// Recording is what a run recorded: the input of every renderer and the
// JSON format.
type Recording struct {
	Lanes  []spacetime.Lane
	Events []spacetime.Event
}

// FromRecorder copies what r recorded.
func FromRecorder(r *spacetime.Recorder) Recording {
	return Recording{Lanes: r.Lanes(), Events: r.Events()}
}

// runLane holds the events that name no lane of their own (a recovery
// point, a seam, a restore) when the run declared no coordinator lane.
const runLane = "run"

// Span kinds: an interval on one lane.
const (
	spanBlock    = "block"
	spanReplay   = "replay"
	spanUnit     = "unit"
	spanSnapshot = "snapshot"
	spanDead     = "dead"
)

type span struct {
	kind     string
	lane     int
	from, to time.Duration
	open     bool // no end event: drawn to the end of the run
	ev       spacetime.Event
}

// model is a recording arranged for drawing.
type model struct {
	lanes  []spacetime.Lane
	index  map[string]int
	events []spacetime.Event // by time, ties in recorded order
	end    time.Duration     // the last moment drawn
	spans  []span
	coord  int // the lane of events that name none
}

// kindRank orders lanes top to bottom as records flow: sources, then
// operators and units, then sinks, the coordinator last.
func kindRank(kind string) int {
	switch kind {
	case "source":
		return 0
	case "operator":
		return 1
	case "unit":
		return 2
	case "sink":
		return 3
	case "coordinator":
		return 5
	}
	return 4
}

func newModel(rec Recording) *model {
	m := &model{index: map[string]int{}}
	add := func(l spacetime.Lane) {
		if _, ok := m.index[l.ID]; ok || l.ID == "" {
			return
		}
		m.index[l.ID] = len(m.lanes)
		m.lanes = append(m.lanes, l)
	}
	for _, l := range rec.Lanes {
		add(l)
	}
	// A lane an event names but the run never declared is drawn anyway, so
	// nothing recorded is hidden.
	for _, e := range rec.Events {
		for _, id := range []string{e.Lane, e.From, e.To} {
			add(spacetime.Lane{ID: id, Kind: "", Worker: e.Worker, Label: id})
		}
	}
	m.events = slices.Clone(rec.Events)
	slices.SortStableFunc(m.events, func(a, b spacetime.Event) int { return cmp.Compare(a.T, b.T) })
	if needsRunLane(m.events) && !slices.ContainsFunc(m.lanes, func(l spacetime.Lane) bool { return l.Kind == "coordinator" }) {
		add(spacetime.Lane{ID: runLane, Kind: "coordinator", Worker: -1, Label: runLane})
	}
	slices.SortStableFunc(m.lanes, func(a, b spacetime.Lane) int { return cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)) })
	for i, l := range m.lanes {
		m.index[l.ID] = i
	}
	m.coord = -1
	for i, l := range m.lanes {
		if l.Kind == "coordinator" {
			m.coord = i
			break
		}
	}
	for _, e := range m.events {
		m.end = max(m.end, e.T)
	}
	if m.end <= 0 {
		m.end = time.Millisecond
	}
	m.pairSpans()
	return m
}

// needsRunLane reports whether some event is drawn on the coordinator's
// lane for want of its own.
func needsRunLane(events []spacetime.Event) bool {
	for _, e := range events {
		if e.Lane == "" && laneless(e.Kind) {
			return true
		}
	}
	return false
}

// laneless kinds are drawn on the coordinator's lane when they name no lane.
func laneless(kind string) bool {
	switch kind {
	case spacetime.PointComplete, spacetime.PointFailed, spacetime.Commit, spacetime.Ledger, spacetime.Restore, spacetime.Seam:
		return true
	}
	return false
}

// laneOf is the lane an event is drawn on, -1 for none.
func (m *model) laneOf(e spacetime.Event) int {
	if i, ok := m.index[e.Lane]; ok && e.Lane != "" {
		return i
	}
	if e.Kind == spacetime.InFlight {
		// Persisted records belong to the receiving end of their channel.
		if _, to, ok := strings.Cut(e.Channel, "->"); ok {
			if i, ok := m.index[to]; ok {
				return i
			}
		}
		if i, ok := m.index[e.To]; ok && e.To != "" {
			return i
		}
	}
	if laneless(e.Kind) {
		return m.coord
	}
	return -1
}

// workerLanes are the lanes a worker runs.
func (m *model) workerLanes(w int) []int {
	var out []int
	for i, l := range m.lanes {
		if l.Worker == w && l.Kind != "coordinator" {
			out = append(out, i)
		}
	}
	return out
}

// pairSpans matches start events with their ends: blocking per lane and
// channel, replay per lane, units and snapshots per lane and id, dead time
// from a crash to the next restore or the lane's next work.
func (m *model) pairSpans() {
	type key struct {
		kind string
		lane int
		sub  string
		id   int64
	}
	opened := map[key]int{} // index into m.spans
	var order []key
	start := func(k key, e spacetime.Event) {
		if k.lane < 0 {
			return // a span on no lane is not drawn
		}
		if _, ok := opened[k]; ok {
			return // a second start before the end: the first one holds
		}
		opened[k] = len(m.spans)
		order = append(order, k)
		m.spans = append(m.spans, span{kind: k.kind, lane: k.lane, from: e.T, ev: e})
	}
	finish := func(k key, e spacetime.Event) {
		i, ok := opened[k]
		if !ok {
			return
		}
		delete(opened, k)
		m.spans[i].to = e.T
		if e.Rerun {
			m.spans[i].ev.Rerun = true
		}
	}
	for _, e := range m.events {
		l := m.laneOf(e)
		if revives(e.Kind) && l >= 0 {
			// A dead lane at work again has been replaced (disk-phase
			// replaces a worker without a restore event).
			finish(key{spanDead, l, "", 0}, e)
		}
		switch e.Kind {
		case spacetime.BlockStart:
			start(key{spanBlock, l, e.Channel, 0}, e)
		case spacetime.BlockEnd:
			finish(key{spanBlock, l, e.Channel, 0}, e)
		case spacetime.ReplayStart:
			start(key{spanReplay, l, e.Channel, 0}, e)
		case spacetime.ReplayEnd:
			finish(key{spanReplay, l, e.Channel, 0}, e)
		case spacetime.UnitStart:
			start(key{spanUnit, l, "", e.ID}, e)
		case spacetime.UnitEnd:
			finish(key{spanUnit, l, "", e.ID}, e)
		case spacetime.SnapshotStart:
			start(key{spanSnapshot, l, "", e.ID}, e)
		case spacetime.SnapshotDurable:
			finish(key{spanSnapshot, l, "", e.ID}, e)
		case spacetime.Crash:
			for _, wl := range m.crashLanes(e) {
				start(key{spanDead, wl, "", 0}, e)
			}
		case spacetime.Restore:
			for k := range opened {
				if k.kind == spanDead {
					finish(k, e)
				}
			}
		}
	}
	for _, k := range order {
		if i, ok := opened[k]; ok {
			m.spans[i].to, m.spans[i].open = m.end, true
		}
	}
	// A crash also ends what its lanes were doing: blocking, replay and
	// units left open are cut at the crash, not drawn to the end.
	for i := range m.spans {
		s := &m.spans[i]
		if !s.open || s.kind == spanDead {
			continue
		}
		for _, d := range m.spans {
			if d.kind == spanDead && d.lane == s.lane && d.from >= s.from {
				s.to = d.from
				break
			}
		}
	}
	slices.SortStableFunc(m.spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
}

// crashLanes are the lanes a crash kills: its worker's, or its own lane
// when it names one and the worker runs none.
func (m *model) crashLanes(e spacetime.Event) []int {
	lanes := m.workerLanes(e.Worker)
	if len(lanes) == 0 {
		if i, ok := m.index[e.Lane]; ok && e.Lane != "" {
			lanes = []int{i}
		}
	}
	return lanes
}

// pointName names a recovery point for a label: "point 3", or "the
// start" for the restore of none.
func pointName(id int64) string {
	if id < 0 {
		return "the start"
	}
	return "point " + strconv.FormatInt(id, 10)
}

// revives says an event of kind k on a lane is new work there, so a lane
// dead before it has been replaced. What is recorded of the dead (a lost
// piece) is not.
func revives(k string) bool {
	switch k {
	case spacetime.Batch, spacetime.UnitStart, spacetime.SnapshotStart, spacetime.Marker, spacetime.ReplayStart:
		return true
	}
	return false
}
