package recordwise

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// CheckpointStats is one finished checkpoint as the history shows it, the
// same figures Flink's checkpoint history gives. Durations are in
// milliseconds.
type CheckpointStats struct {
	ID uint64 `json:"id"`
	// Attempt is the incarnation (0 = first run, 1 = after the first
	// restart, ...) that took it.
	Attempt int    `json:"attempt"`
	Status  string `json:"status"` // completed, failed or aborted
	Reason  string `json:"reason,omitempty"`
	// Final marks the checkpoint that ends a bounded run: taken once every
	// task has ended, so no barrier travels and nothing is in flight.
	Final bool `json:"final,omitempty"`
	// TriggerMs is when it was triggered, from the start of the run.
	TriggerMs float64 `json:"trigger_ms"`
	// DurationMs is end to end: trigger to metadata written (or abandoned).
	DurationMs float64 `json:"duration_ms"`
	// StateBytes and InFlightBytes are sums over the acknowledged parts.
	StateBytes      int64 `json:"state_bytes"`
	InFlightBytes   int64 `json:"in_flight_bytes"`
	InFlightRecords int64 `json:"in_flight_records"`
	// Maxima over the tasks.
	MaxAlignmentMs  float64 `json:"max_alignment_ms"`
	MaxStartDelayMs float64 `json:"max_start_delay_ms"`
	// ProcessedDuringAlignmentBytes sums the tasks' figures.
	ProcessedDuringAlignmentBytes int64                 `json:"processed_during_alignment_bytes"`
	Tasks                         []TaskCheckpointStats `json:"tasks"`
}

// TaskCheckpointStats is one task's part of a checkpoint.
type TaskCheckpointStats struct {
	Task string `json:"task"`
	// StartDelayMs: barrier creation (trigger) to its first arrival here.
	StartDelayMs float64 `json:"start_delay_ms"`
	// AlignmentMs: first barrier to snapshot, i.e. how long input was held
	// back. Aligned: the skew between the input channels. Unaligned: 0.
	AlignmentMs float64 `json:"alignment_ms"`
	// CollectMs: first barrier to the part being whole (the barrier
	// arrived on every channel). Unaligned checkpoints persist in-flight
	// data during this time.
	CollectMs float64 `json:"collect_ms"`
	// SyncMs: the synchronous part (flush, state copy, barrier emission,
	// sink pre-commit). AsyncMs: encoding and writing the part.
	SyncMs  float64 `json:"sync_ms"`
	AsyncMs float64 `json:"async_ms"`
	// Records processed between the first barrier and the snapshot.
	ProcessedDuringAlignmentBytes int64 `json:"processed_during_alignment_bytes"`
	ProcessedDuringAlignmentRows  int64 `json:"processed_during_alignment_rows"`
	StateBytes                    int64 `json:"state_bytes"`
	InFlightBytes                 int64 `json:"in_flight_bytes"`
	InFlightRecords               int64 `json:"in_flight_records"`
	Unaligned                     bool  `json:"unaligned"`
	TimedOut                      bool  `json:"timed_out"`
}

// RestoreInfo describes one restart, for tests and traces.
type RestoreInfo struct {
	Attempt int
	// From is the recovery point restored (0: the start of the input).
	From checkpoint.ID
	// Listing is what storage held, Plan what checkpoint.Restore chose.
	Listing checkpoint.Listing
	Plan    checkpoint.RestorePlan
	// Parts counts the part descriptors each listed checkpoint had.
	Parts map[checkpoint.ID]int
	// fromParts are the restored point's parts, from its metadata; bytes
	// what reading the point back from storage read.
	fromParts []metaPart
	bytes     int64
}

// Report is what a run measured beyond report.Summary.
type Report struct {
	History  []CheckpointStats
	Restores []RestoreInfo
	Skipped  int
	// HandOverMs is the latency from a source's hand-over to the sink
	// writer (before the sink makes rows visible): the engine's share of
	// the end-to-end latency.
	HandOverMs *report.Latency
}

// progressEvery is the longest a run with records flowing goes without a
// "progress" line; a completed checkpoint writes one too.
const progressEvery = time.Second

// observer is the measurement harness of a run. It outlives incarnations
// because it is the observer, not part of the job: tasks and coordinators
// only write to it; nothing it holds is ever read back into job state.
type observer struct {
	start    time.Time
	progress *report.Progress
	// series is the run over time (run.Env.Series; nil-safe).
	series *report.SeriesRecorder

	recordsIn atomic.Int64
	rowsOut   atomic.Int64
	// replaysDropped counts replayed rows the sink tasks did not publish
	// because they were already visible (see publishedRows).
	replaysDropped atomic.Int64

	mu         sync.Mutex
	lat        *report.LatencyRecorder
	handed     *report.LatencyRecorder
	late, lost int64
	hw         map[string]int64 // input/partition -> greatest offset read
	bill       report.Bill
	catchUp    *catchUp
	report     Report
	// done is what the summary's note says of every completed checkpoint,
	// kept exactly however many report.History has dropped.
	done      cpTotals
	completed int
	failed    int
	aborted   int
	triggers  int
	notes     []string
	// lastProgress is when the newest "progress" line was written, and
	// readAtProgress the records read by then.
	lastProgress   time.Time
	readAtProgress int64
	// newestCompleted is the newest completed checkpoint (0: none).
	newestCompleted uint64
	// resumed is the bill of the earlier process's death (--resume), and
	// resumedFrom what the first restore of this process found.
	resumed     *recovery
	resumedFrom *report.ResumedFrom
	// fwd, in a worker process, takes what the tasks there measure to the
	// coordinator's observer instead (procobs.go); nil in the coordinator.
	fwd func(obsMsg)
}

// recovery is the bill of one crash and when the crash was detected, the
// start of its restore.
type recovery struct {
	*report.Crash
	// readyAt is when the replacement was ready: the restore is measured
	// from it.
	readyAt time.Time
}

type catchUp struct {
	rec    *recovery
	from   time.Time
	target map[string]int64
}

func newObserver(progress io.Writer) *observer {
	start := time.Now()
	return &observer{start: start, progress: report.NewProgress(progress, "recordwise", start), lat: report.NewLatencyRecorder(),
		handed: report.NewLatencyRecorder(), hw: map[string]int64{}, lastProgress: start}
}

// progressLine writes a "progress" event: the counts so far and the input
// rate since the previous one. o.mu is held.
func (o *observer) progressLine(now time.Time) {
	in := o.recordsIn.Load()
	rate := 0.0
	if d := now.Sub(o.lastProgress); d > 0 {
		rate = float64(in-o.readAtProgress) / d.Seconds()
	}
	var newest *uint64
	if o.newestCompleted > 0 {
		id := o.newestCompleted
		newest = &id
	}
	o.progress.EmitAt("progress", now, map[string]any{
		"records_in": in, "rows_out": o.rowsOut.Load(), "input_rows": in - o.readAtProgress,
		"input_rows_per_second": rate, "late_rows": o.late, "lost_records": o.lost,
		"checkpoints_completed": o.completed, "newest_checkpoint": newest, "crashes": o.bill.Crashes(),
	})
	o.lastProgress, o.readAtProgress = now, in
}

func (o *observer) addRowsOut(n int64) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsRowsOut, N: n})
		return
	}
	o.rowsOut.Add(n)
}

func (o *observer) addReplaysDropped(n int64) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsReplaysDropped, N: n})
		return
	}
	o.replaysDropped.Add(n)
}

// handedOver records rows reaching a sink writer at `at`.
func (o *observer) handedOver(rows []latEntry, at time.Time) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsHanded, Rows: wireLat(rows), At: nanos(at)})
		return
	}
	o.mu.Lock()
	for _, r := range rows {
		if !r.born.IsZero() {
			o.handed.Record(at.Sub(r.born), r.rows)
		}
	}
	o.mu.Unlock()
}

func (o *observer) recordLatency(rows []latEntry, visible time.Time) {
	if len(rows) == 0 {
		return
	}
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsVisible, Rows: wireLat(rows), At: nanos(visible)})
		return
	}
	o.mu.Lock()
	for _, r := range rows {
		if r.born.IsZero() {
			continue
		}
		o.lat.Record(visible.Sub(r.born), r.rows)
	}
	o.mu.Unlock()
	o.series.Visible(visible, len(rows), func(i int) (time.Duration, int64) {
		if rows[i].born.IsZero() {
			return -1, rows[i].rows // visible, its latency unknown
		}
		return visible.Sub(rows[i].born), rows[i].rows
	})
}

// read records n records of input/partition consumed up to offset.
func (o *observer) read(input, partition string, offset, n int64, now time.Time) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsRead, Input: input, Partition: partition, Offset: offset, N: n, At: nanos(now)})
		return
	}
	o.recordsIn.Add(n)
	key := input + "/" + partition
	o.mu.Lock()
	defer o.mu.Unlock()
	if offset > o.hw[key] {
		o.hw[key] = offset
	}
	if now.Sub(o.lastProgress) >= progressEvery {
		o.progressLine(now)
	}
	if cu := o.catchUp; cu != nil {
		if t, ok := cu.target[key]; ok && offset >= t {
			delete(cu.target, key)
			if len(cu.target) == 0 {
				d := now.Sub(cu.from)
				cu.rec.CatchUp = &d
				o.catchUp = nil
			}
		}
	}
}

func (o *observer) addLate(n int64) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsLate, N: n})
		return
	}
	o.mu.Lock()
	o.late += n
	o.mu.Unlock()
}

func (o *observer) addLost(n int64) {
	if o.fwd != nil {
		o.fwd(obsMsg{Kind: obsLost, N: n})
		return
	}
	o.mu.Lock()
	o.lost += n
	o.mu.Unlock()
}

func (o *observer) note(s string) {
	o.mu.Lock()
	o.notes = append(o.notes, s)
	o.mu.Unlock()
}

func (o *observer) triggered() {
	o.mu.Lock()
	o.triggers++
	o.mu.Unlock()
}

func (o *observer) skipped() {
	o.mu.Lock()
	o.report.Skipped++
	o.mu.Unlock()
}

// checkpointDone records a finished checkpoint in the history.
func (o *observer) checkpointDone(attempt int, final bool, st checkpoint.Stats, tasks []TaskCheckpointStats) {
	cs := CheckpointStats{ID: uint64(st.ID), Attempt: attempt, Final: final, TriggerMs: report.Millis(st.Triggered.Sub(o.start)),
		DurationMs: report.Millis(st.Duration()), StateBytes: st.StateBytes, InFlightBytes: st.InFlightBytes,
		InFlightRecords: st.InFlightRecords, Tasks: tasks}
	switch st.Status {
	case checkpoint.Completed:
		cs.Status = "completed"
	case checkpoint.Failed:
		cs.Status = "failed"
	default:
		cs.Status = "aborted"
	}
	if st.Reason != 0 {
		cs.Reason = st.Reason.String()
	}
	for _, t := range tasks {
		cs.MaxAlignmentMs = max(cs.MaxAlignmentMs, t.AlignmentMs)
		cs.MaxStartDelayMs = max(cs.MaxStartDelayMs, t.StartDelayMs)
		cs.ProcessedDuringAlignmentBytes += t.ProcessedDuringAlignmentBytes
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch cs.Status {
	case "completed":
		o.completed++
		o.newestCompleted = max(o.newestCompleted, cs.ID)
	case "failed":
		o.failed++
	default:
		o.aborted++
	}
	o.keep(cs)
	o.series.PointTook("checkpoint", int64(cs.ID), cs.Status, time.Duration(cs.DurationMs*float64(time.Millisecond)))
	o.writeCheckpointEvent(cs)
	if cs.Status == "completed" {
		o.progressLine(time.Now())
	}
}

// writeCheckpointEvent writes cs as a "checkpoint" progress event, so the
// progress stream (and `rewind trace`) holds every point the history
// does. o.mu is held.
func (o *observer) writeCheckpointEvent(cs CheckpointStats) {
	o.progress.Emit("checkpoint", cs)
}

// begin sets the run's start, from which the bill's at_ms counts.
func (o *observer) begin(start time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.start, o.bill.Start = start, start
}

// cutShort writes a failed "checkpoint" event, with its reason, for each
// checkpoint a crash left in progress, so the progress stream shows the
// failures crash counts; the failed count itself is crash's.
func (o *observer) cutShort(attempt int, ids []checkpoint.ID, cause string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		// Not a CheckpointStats: its figures were never measured, and a 0
		// duration or size would read as one.
		o.progress.Emit("checkpoint", map[string]any{"id": uint64(id), "attempt": attempt, "status": "failed",
			"reason": "cut short by a crash: " + cause})
	}
}

// crash records a crash and the checkpoints it cut short. waited holds
// the crash's time and its detect and acquire (report.Replacement), the
// replacement was ready at ready.
func (o *observer) crash(cause string, waited *report.Crash, ready time.Time, inProgress int) *recovery {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed += inProgress
	at := waited.At
	r := &recovery{Crash: o.bill.Open(cause, at), readyAt: ready}
	r.Detect, r.Acquire, r.Modelled = waited.Detect, waited.Acquire, waited.Modelled
	d := *r.Detect
	if o.catchUp != nil {
		o.catchUp = nil // the previous recovery never caught up
	}
	o.progress.EmitAt("crash", at, map[string]any{"cause": cause,
		"detect_ms": report.Millis(d), "checkpoints_in_progress": inProgress})
	return r
}

// processDied opens the bill of the earlier process's death; the first
// restore completes it. The observer's start, just before the first
// incarnation is built, stands for its detection. No crash event is
// written (it happened in the earlier process); the recovery event carries
// the cause.
func (o *observer) processDied() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.resumed = &recovery{Crash: o.bill.ProcessDied(o.start), readyAt: o.start}
}

// completedUnseen enters into the history a recovery point restored from
// that the history does not hold as completed: its metadata became durable
// but the coordinator died before it acted on that, so the crash counted
// the point as failed. Durable metadata is what makes a point complete.
func (o *observer) completedUnseen(info RestoreInfo) {
	if info.From == 0 {
		return
	}
	// The history holds only the newest checkpoints (historyKeep), which
	// is enough: the point whose completion went unseen is the newest one
	// the coordinator wrote before it died.
	for _, h := range o.report.History {
		if h.ID == uint64(info.From) && h.Status == "completed" {
			return
		}
	}
	cs := CheckpointStats{ID: uint64(info.From), Attempt: max(info.Attempt-1, 0), Status: "completed",
		Reason: "metadata was durable when the coordinator died; completion noticed at restore"}
	for _, p := range info.fromParts {
		cs.StateBytes += p.StateBytes
		cs.InFlightBytes += p.InFlightBytes
		cs.InFlightRecords += p.InFlightRecords
	}
	o.completed++
	if o.failed > 0 {
		o.failed--
	}
	o.keep(cs)
	o.writeCheckpointEvent(cs)
}

// restarted completes the bill of r once the new incarnation runs: the
// restore time, the records to read again, and the catch-up target.
func (o *observer) restarted(r *recovery, info RestoreInfo, restored map[string]int64, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.report.Restores = append(o.report.Restores, info)
	if e := o.resumed; e != nil && !e.Restored() {
		// The point was completed by the earlier process: not one of
		// this process's checkpoints.
		o.restoredAfterDeath(e, info, restored, now)
	} else {
		o.completedUnseen(info)
	}
	if r == nil {
		return
	}
	rs := now.Sub(r.readyAt)
	var rp int64
	target := map[string]int64{}
	for key, hw := range o.hw {
		if pos := restored[key]; hw > pos {
			rp += hw - pos
			target[key] = hw
		}
	}
	r.Restore, r.Reprocessed = &rs, &rp
	if info.From != 0 {
		b := info.bytes
		r.RestoreBytes = &b
	}
	if len(target) == 0 {
		zero := time.Duration(0)
		r.CatchUp = &zero
	} else {
		o.catchUp = &catchUp{rec: r, from: now, target: target}
	}
	o.progress.Emit("recovery", map[string]any{"attempt": info.Attempt, "from_checkpoint": uint64(info.From),
		"discarded_incomplete": len(info.Plan.Discard), "restore_ms": report.Millis(rs), "reprocessed_records": rp})
}

// restoredAfterDeath completes the bill of the earlier process's death at
// the first restore of this one: the restore time and the point restored.
// Nothing is reprocessed on its account that this process could count, and
// there is no catch-up target. o.mu is held.
func (o *observer) restoredAfterDeath(e *recovery, info RestoreInfo, restored map[string]int64, now time.Time) {
	rs := now.Sub(e.readyAt)
	e.Restore = &rs
	if info.From != 0 {
		b := info.bytes
		e.RestoreBytes = &b
	}
	rf := &report.ResumedFrom{Kind: "checkpoint"}
	if info.From != 0 {
		id := int64(info.From)
		rf.ID = &id
	}
	for _, pos := range restored {
		rf.RecordsBefore += pos
	}
	o.resumedFrom = rf
	o.progress.Emit("recovery", map[string]any{"cause": e.Cause, "attempt": info.Attempt, "from_checkpoint": uint64(info.From),
		"discarded_incomplete": len(info.Plan.Discard), "restore_ms": report.Millis(rs), "reprocessed_records": nil,
		"resumed_from": rf})
}

func (o *observer) summary(wall time.Duration) (*report.Summary, Report) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := &report.Summary{
		RecordsIn:   o.recordsIn.Load(),
		RowsOut:     o.rowsOut.Load(),
		LostRecords: o.lost,
		LateRows:    o.late,
		Crashes:     o.bill.Crashes(),
		Checkpoints: &report.Checkpoints{Completed: o.completed, Failed: o.failed, Aborted: o.aborted},
		LatencyMs:   o.lat.Latency(),
		WallMs:      report.Millis(wall),
		Notes:       slices.Clone(o.notes),
		ResumedFrom: o.resumedFrom,
	}
	if n := o.replaysDropped.Load(); n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d replayed rows already visible (published before a fallback to an older recovery point) were not published again", n))
	}
	if wall > 0 {
		s.ThroughputRPS = float64(s.RecordsIn) / wall.Seconds()
	}
	s.Recoveries = o.bill.Recoveries()
	if d := &o.done; d.n > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf(
			"recordwise checkpoints: %d completed, end-to-end p50 %.1f ms, max %.1f ms; alignment max %.1f ms; last state %d bytes; in-flight data persisted %d bytes in total; %d triggers skipped while one was pending",
			d.n, d.p50(o.report.History), d.maxMs, d.maxAlignMs, d.state, d.inflight, o.report.Skipped))
	}
	rep := Report{History: slices.Clone(o.report.History), Restores: slices.Clone(o.report.Restores), Skipped: o.report.Skipped,
		HandOverMs: o.handed.Latency()}
	return s, rep
}
