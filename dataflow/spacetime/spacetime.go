// Package spacetime records the steps of a run that a time-space diagram
// draws: one lane per task (source subtasks, operators, sink, the
// coordinator), time left to right, record batches as arrows between
// lanes, markers on the channels they cross, blocking, snapshots, seams,
// units, the crash and the replay. rewind trace renders it as text lanes,
// SVG, HTML or raw JSON.
//
// A run records only when its run.Env carries a Recorder; every method of
// a nil *Recorder does nothing, so the executors' calls cost a nil check
// in ordinary runs.
package spacetime

import (
	"sync"
	"time"
)

// Lane is one horizontal line of the diagram.
type Lane struct {
	ID string `json:"id"` // unique, e.g. "src/in/p0", "op/agg/1", "sink/0", "coordinator"
	// Kind is source, operator, sink, coordinator or unit.
	Kind string `json:"kind"`
	// Worker is the worker that runs the lane (-1: the coordinator).
	Worker int    `json:"worker"`
	Label  string `json:"label"`
}

// Event kinds. An executor records the ones its model has.
const (
	Batch           = "batch"            // records moved From -> To (an arrow)
	Marker          = "marker"           // a checkpoint marker sent From -> To on a channel
	BlockStart      = "block-start"      // Lane stops reading Channel (alignment)
	BlockEnd        = "block-end"        // Lane reads Channel again
	SnapshotStart   = "snapshot-start"   // Lane copies its state for point ID
	SnapshotDurable = "snapshot-durable" // Lane's part of point ID is in storage
	InFlight        = "in-flight"        // Records overtaken on Channel persisted with point ID
	PointComplete   = "point-complete"   // recovery point ID is complete (metadata durable)
	PointFailed     = "point-failed"     // recovery point ID failed or was aborted (Note: why)
	Seam            = "seam"             // micro-batch ID's seam (offsets logged: Note)
	Commit          = "commit"           // batch / finite job ID committed
	UnitStart       = "unit-start"       // disk-phase unit ID (Note: map/reduce) started on Lane
	UnitEnd         = "unit-end"         // ... finished; with Rerun it was a re-run
	Ledger          = "ledger"           // a ledger entry for unit ID written
	Crash           = "crash"            // Worker's lanes die here
	Restore         = "restore"          // restored recovery point ID (-1: none, from the start)
	ReplayStart     = "replay-start"     // Lane reads again what it had read before
	ReplayEnd       = "replay-end"       // ... and is past where the crash found it
	PieceLost       = "piece-lost"       // lineage: piece ID of Worker lost
	PieceRebuilt    = "piece-rebuilt"    // lineage: piece ID rebuilt on Lane (a survivor)
)

// Event is one step at one moment.
type Event struct {
	// T is the time since the run started.
	T       time.Duration `json:"t_us"`
	Kind    string        `json:"kind"`
	Lane    string        `json:"lane,omitempty"`
	From    string        `json:"from,omitempty"`
	To      string        `json:"to,omitempty"`
	Channel string        `json:"channel,omitempty"`
	Worker  int           `json:"worker"`
	ID      int64         `json:"id"`
	Records int64         `json:"records,omitempty"`
	Rerun   bool          `json:"rerun,omitempty"`
	Replay  bool          `json:"replay,omitempty"` // a batch that carries replayed records
	Note    string        `json:"note,omitempty"`
}

// Recorder collects the lanes and events of one run. Safe for concurrent
// use; a nil *Recorder records nothing.
type Recorder struct {
	start time.Time

	mu     sync.Mutex
	lanes  []Lane
	seen   map[string]bool
	events []Event
	// read is, per lane and partition, the end of what was read so far,
	// and replaying the lanes re-reading it (see Read).
	read      map[string]int64
	replaying map[string]bool
	// dirty are the read marks moved since the last Drain (forward.go).
	dirty map[string]bool
}

// NewRecorder starts the clock.
func NewRecorder(start time.Time) *Recorder {
	return &Recorder{start: start, seen: map[string]bool{}, read: map[string]int64{}, replaying: map[string]bool{}, dirty: map[string]bool{}}
}

// Enabled says events are recorded, so a caller can skip building them.
func (r *Recorder) Enabled() bool { return r != nil }

// AddLane declares a lane once; later declarations of the same ID are ignored.
func (r *Recorder) AddLane(l Lane) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[l.ID] {
		return
	}
	r.seen[l.ID] = true
	r.lanes = append(r.lanes, l)
}

// Add records e as happening at at (e.T is set from it).
func (r *Recorder) Add(at time.Time, e Event) {
	if r == nil {
		return
	}
	e.T = at.Sub(r.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Record adds e as happening now. The clock is read only when recording,
// so a caller on a hot path pays the nil check alone.
func (r *Recorder) Record(e Event) {
	if r == nil {
		return
	}
	r.Add(time.Now(), e)
}

// Read notes that lane read [start, end) of partition part and reports
// whether any of it had been read before (a replay after a restore). The
// first such read records ReplayStart on the lane, the read that reaches
// where the earlier reads had got to records ReplayEnd, so every executor
// that re-reads its input marks the replayed region the same way.
func (r *Recorder) Read(lane, part string, start, end int64) bool {
	if r == nil {
		return false
	}
	now := time.Now()
	key := lane + "\x00" + part
	r.mu.Lock()
	high, seen := r.read[key]
	replay := seen && start < high
	if end > high || !seen {
		r.read[key] = end
		r.dirty[key] = true
	}
	var add []Event
	if replay && !r.replaying[key] {
		r.replaying[key] = true
		add = append(add, Event{Kind: ReplayStart, Lane: lane, Channel: part, ID: start, Worker: -1})
	}
	if r.replaying[key] && end >= high {
		delete(r.replaying, key)
		add = append(add, Event{Kind: ReplayEnd, Lane: lane, Channel: part, ID: high, Worker: -1})
	}
	r.mu.Unlock()
	for _, e := range add {
		r.Add(now, e)
	}
	return replay
}

// Replaying reports whether lane is re-reading input it read before (Read
// recorded its ReplayStart and not yet its ReplayEnd, on any partition).
func (r *Recorder) Replaying(lane string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for key := range r.replaying {
		if len(key) > len(lane) && key[:len(lane)] == lane && key[len(lane)] == 0 {
			return true
		}
	}
	return false
}

// Lanes returns the lanes in the order they were declared.
func (r *Recorder) Lanes() []Lane {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Lane(nil), r.lanes...)
}

// Events returns the events in the order they were added.
func (r *Recorder) Events() []Event {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}
