package microbatch

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// metrics is the measurement harness of a run. It outlives coordinator
// incarnations because it is the observer, not part of the job: the
// coordinator only ever writes to it (every method records, none returns
// job state), so recovery cannot depend on anything it holds.
type metrics struct {
	start    time.Time
	progress *report.Progress
	lat      *report.LatencyRecorder
	// The end-to-end latency split in two: hand-over to the plan of the
	// batch that takes the record (waiting for a trigger, or for the
	// previous batch to end), and plan to visibility (the batch's own work).
	latWait, latWork *report.LatencyRecorder
	// series is the run over time (run.Env.Series; nil-safe).
	series *report.SeriesRecorder

	recordsIn atomic.Int64

	mu              sync.Mutex
	rowsOut         int64
	committed       int
	failed, aborted int
	lost            int64
	lateRows        int64
	committedRows   int64
	bill            report.Bill
	recoveries      []*recovery
	steps           stepTotals
	stateRows       int64
	stateBytes      int64
	stateWritten    int64
	stateChanged    int64
	fullSnapshots   int
	lastPlanStart   time.Time
	// pieces are the lost-piece figures, under pieceRecovery, the
	// recovery in force.
	pieces        report.PieceTally
	pieceRecovery string
	notes         []string
	// resumed is the bill of the earlier process's death (--resume), and
	// resumedFrom what the first restore of this process found.
	resumed     *recovery
	resumedFrom *report.ResumedFrom
}

// recovery is the bill of one crash, filled in as recovery proceeds.
type recovery struct {
	*report.Crash
	// highWater are the read positions when the crash happened; catch-up
	// is complete when a committed batch covers them and was not cut short
	// by --max-batch-records.
	highWater []int64
}

type stepTotals struct {
	n                                                int
	plan, offsets, run, state, sink, commit, publish time.Duration
}

// newMetrics measures a run that started at start (run.Env.Begin).
func newMetrics(progress io.Writer, pieceRecovery string, start time.Time) *metrics {
	return &metrics{start: start, bill: report.Bill{Start: start}, progress: report.NewProgress(progress, "microbatch", start), lat: report.NewLatencyRecorder(),
		latWait: report.NewLatencyRecorder(), latWork: report.NewLatencyRecorder(), pieceRecovery: pieceRecovery}
}

func (m *metrics) read(n int64) { m.recordsIn.Add(n) }

func (m *metrics) committedCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.committed
}

// latency records, for every input slice of a batch, the time from its
// hand-over to the batch's visibility, weighted by its rows, and that time
// split at the batch's plan.
func (m *metrics) latency(planned, visible time.Time, hs []handoverRows) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range hs {
		m.lat.Record(visible.Sub(h.at), h.rows)
		m.latWait.Record(planned.Sub(h.at), h.rows)
		m.latWork.Record(visible.Sub(planned), h.rows)
	}
	m.series.Visible(visible, len(hs), func(i int) (time.Duration, int64) { return visible.Sub(hs[i].at), hs[i].rows })
}

func (m *metrics) addLost(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.lost += n
	m.mu.Unlock()
}

func (m *metrics) addRowsOut(n int64) {
	m.mu.Lock()
	m.rowsOut += n
	m.mu.Unlock()
}

// crash records a crash; the returned recovery is completed later.
func (m *metrics) crash(cause string, at time.Time, highWater []int64) *recovery {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &recovery{Crash: m.bill.Open(cause, at), highWater: highWater}
	m.recoveries = append(m.recoveries, r)
	m.progress.EmitAt("crash", at, map[string]any{"cause": cause})
	return r
}

// processDied opens the bill of the earlier process's death; the first
// restore completes it. Run's start stands for the crash: nothing earlier
// is known, and no crash event is written (it happened in the earlier
// process); the recovery event carries the cause.
func (m *metrics) processDied() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resumed = &recovery{Crash: m.bill.ProcessDied(m.start)}
	m.recoveries = append(m.recoveries, m.resumed)
}

// restoredFrom records what the first restore of a resumed process found:
// the newest committed batch (-1: none) and the offsets it ended at.
func (m *metrics) restoredFrom(batch int64, ends []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resumed == nil || m.resumedFrom != nil {
		return
	}
	rf := &report.ResumedFrom{Kind: "batch"}
	if batch >= 0 {
		rf.ID = &batch
	}
	for _, e := range ends {
		rf.RecordsBefore += e
	}
	m.resumedFrom = rf
}

func (m *metrics) setHighWater(r *recovery, hw []int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.highWater == nil {
		r.highWater = hw
	}
}

// batchLost counts batch id's attempt a crash cut short: failed if its
// offsets were logged (it runs again with the same ranges), aborted if
// not (its plan is dropped). A batch progress event with the status and
// the reason puts it in the run's history, as Flink lists a failed
// checkpoint.
func (m *metrics) batchLost(id int64, logged bool, reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	status := report.PointFailed
	if logged {
		m.failed++
	} else {
		m.aborted++
		status = report.PointAborted
	}
	m.series.Point("batch", id, status)
	m.progress.Emit("batch", map[string]any{"batch_id": id, "status": status, "reason": reason})
}

// recovered completes the detection, acquire and restore figures of the
// crashes a recovery repaired: repaired (the first is the one it was for,
// nil or empty when none was pending), waited holds that one's detect and
// acquire (nil: nothing waited), the replacement was ready at
// restoreStart, the restore read bytes from storage. Every other crash not
// yet repaired that happened before restoreStart (a second kill of a
// worker already down, a kill while the coordinator was down) is repaired
// by the same recovery and shares its figures, with nothing reprocessed on
// its account; a crash still pending (it killed a worker after its
// replacement was in place) is not: the next recovery repairs it.
func (m *metrics) recovered(repaired, pending []*recovery, waited *report.Crash, restoreStart, restoreEnd time.Time, reprocessed, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	detected, acquire := restoreStart, time.Duration(0)
	var modelled []string
	if waited != nil {
		detected, acquire, modelled = waited.At.Add(*waited.Detect), *waited.Acquire, waited.Modelled
	}
	var read *int64
	if bytes > 0 {
		read = &bytes
	}
	var r *recovery
	if len(repaired) > 0 {
		r = repaired[0]
	}
	for _, o := range m.recoveries {
		if o.Restored() || slices.Contains(pending, o) || (o.At.After(restoreStart) && !slices.Contains(repaired, o)) {
			continue
		}
		rs := restoreEnd.Sub(restoreStart)
		o.RestoreBytes = read
		if o.Earlier {
			o.Restore = &rs
			m.progress.Emit("recovery", map[string]any{"cause": o.Cause, "detect_ms": nil, "restore_ms": report.Millis(rs),
				"reprocessed_records": nil, "resumed_from": m.resumedFrom})
			continue
		}
		d := max(detected.Sub(o.At), 0)
		a := acquire
		rp := int64(0)
		if o == r {
			rp = reprocessed
		}
		o.Detect, o.Acquire, o.Modelled, o.Restore, o.Reprocessed = &d, &a, modelled, &rs, &rp
		m.progress.Emit("recovery", map[string]any{"cause": o.Cause, "detect_ms": report.Millis(d), "acquire_ms": report.Millis(a),
			"restore_ms": report.Millis(rs), "reprocessed_records": rp})
	}
}

// oneOf is r as the list recovered takes (empty for nil).
func oneOf(r *recovery) []*recovery {
	if r == nil {
		return nil
	}
	return []*recovery{r}
}

// lostPieces records one lost-piece recovery (lineage.go).
func (m *metrics) lostPieces(r lostPieceReport) {
	m.pieces.Loss(r.loss)
	lost := make([]int, len(r.lost))
	for i, w := range r.lost {
		lost[i] = int(w)
	}
	surv := make([]int, len(r.survivors))
	for i, w := range r.survivors {
		surv[i] = int(w)
	}
	m.progress.Emit("lost_pieces", map[string]any{"recovery": r.mode, "batch_id": r.batch, "lost_workers": lost,
		"survivors": surv, "pieces_lost": r.loss.PiecesLost, "pieces_rebuilt": r.loss.PiecesRebuilt,
		"records_reread": r.loss.RecordsReread, "rebuild_ms": report.Millis(r.loss.Wall), "pieces": r.pieces()})
}

// note adds a caveat to the summary.
func (m *metrics) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes = append(m.notes, s)
}

// batchReport is what one committed batch contributes.
type batchReport struct {
	batch        int64
	rerun        bool
	planStart    time.Time
	inputRows    int64
	rowsOut      int64
	lateRows     int64
	steps        stepTotals
	total        time.Duration
	stateRows    int64
	stateBytes   int64
	stateWritten int64
	stateChanged int64 // new or changed state entries
	stateVersion int64
	full         bool
	watermark    *int64
	ranges       []partRange
	ends         []int64
	capped       bool
	// plannedAhead: planned while the batch before it was committing.
	plannedAhead bool
}

func (m *metrics) batchCommitted(b batchReport, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.committed++
	m.series.PointTook("batch", b.batch, report.PointCompleted, b.total)
	m.committedRows += b.inputRows
	m.lateRows += b.lateRows
	m.steps.n++
	m.steps.plan += b.steps.plan
	m.steps.offsets += b.steps.offsets
	m.steps.run += b.steps.run
	m.steps.state += b.steps.state
	m.steps.sink += b.steps.sink
	m.steps.commit += b.steps.commit
	m.steps.publish += b.steps.publish
	m.stateRows, m.stateBytes = b.stateRows, b.stateBytes
	m.stateWritten += b.stateWritten
	m.stateChanged += b.stateChanged
	if b.full {
		m.fullSnapshots++
	}
	for _, r := range m.recoveries {
		if r.CatchUp != nil || b.capped || r.highWater == nil {
			continue
		}
		covered := len(b.ends) == len(r.highWater)
		for i := 0; covered && i < len(b.ends); i++ {
			covered = b.ends[i] >= r.highWater[i]
		}
		if covered {
			d := now.Sub(r.At)
			r.CatchUp = &d
		}
	}
	if !m.progress.Enabled() {
		return
	}
	inRate := 0.0
	if !m.lastPlanStart.IsZero() {
		if d := b.planStart.Sub(m.lastPlanStart); d > 0 {
			inRate = float64(b.inputRows) / d.Seconds()
		}
	}
	m.lastPlanStart = b.planStart
	procRate := 0.0
	if b.total > 0 {
		procRate = float64(b.inputRows) / b.total.Seconds()
	}
	type src struct {
		Input     string `json:"input"`
		Partition string `json:"partition"`
		Start     int64  `json:"start_offset"`
		End       int64  `json:"end_offset"`
	}
	srcs := make([]src, len(b.ranges))
	for i, r := range b.ranges {
		srcs[i] = src{r.Input, r.Partition, r.Start, r.End}
	}
	m.progress.Emit("batch", map[string]any{
		"batch_id":                  b.batch,
		"status":                    report.PointCompleted,
		"rerun":                     b.rerun,
		"planned_ahead":             b.plannedAhead,
		"timestamp":                 b.planStart.UTC().Format(time.RFC3339Nano),
		"input_rows":                b.inputRows,
		"input_rows_per_second":     inRate,
		"processed_rows_per_second": procRate,
		"rows_out":                  b.rowsOut,
		"late_rows":                 b.lateRows,
		"durations_ms": map[string]float64{
			"plan": report.Millis(b.steps.plan), "offsets_log": report.Millis(b.steps.offsets), "run": report.Millis(b.steps.run),
			"state_commit": report.Millis(b.steps.state), "sink": report.Millis(b.steps.sink), "commit_log": report.Millis(b.steps.commit),
			"publish": report.Millis(b.steps.publish), "total": report.Millis(b.total),
		},
		"state_rows":          b.stateRows,
		"state_bytes":         b.stateBytes,
		"state_written_bytes": b.stateWritten,
		"state_changed_rows":  b.stateChanged,
		"state_version":       b.stateVersion,
		"full_snapshot":       b.full,
		"watermark":           b.watermark,
		"sources":             srcs,
	})
}

// summary folds everything into the run summary.
func (m *metrics) summary() *report.Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	wall := time.Since(m.start)
	s := &report.Summary{
		RecordsIn:   m.recordsIn.Load(),
		RowsOut:     m.rowsOut,
		LostRecords: m.lost,
		LateRows:    m.lateRows,
		Crashes:     m.bill.Crashes(),
		Checkpoints: &report.Checkpoints{Completed: m.committed, Failed: m.failed, Aborted: m.aborted},
		LatencyMs:   m.lat.Latency(),
		WallMs:      report.Millis(wall),
		ResumedFrom: m.resumedFrom,
	}
	if wall > 0 {
		s.ThroughputRPS = float64(m.committedRows) / wall.Seconds()
	}
	s.LostPieces = m.pieces.Summary(m.pieceRecovery)
	s.Notes = append(s.Notes, m.notes...)
	s.Recoveries = m.bill.Recoveries()
	if n := m.steps.n; n > 0 {
		avg := func(d time.Duration) float64 { return report.Millis(d) / float64(n) }
		s.Notes = append(s.Notes, fmt.Sprintf("microbatch: %d batches committed (%d full state snapshots); mean step ms: plan %.3f, offsets log %.3f, run %.3f, state commit %.3f, sink %.3f, commit log %.3f, publish %.3f",
			m.committed, m.fullSnapshots, avg(m.steps.plan), avg(m.steps.offsets), avg(m.steps.run), avg(m.steps.state),
			avg(m.steps.sink), avg(m.steps.commit), avg(m.steps.publish)))
		if w, k := m.latWait.Latency(), m.latWork.Latency(); w != nil && k != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("microbatch: latency split p50/p99/max ms: hand-over to plan %.1f/%.1f/%.1f, plan to visible %.1f/%.1f/%.1f",
				w.P50, w.P99, w.Max, k.P50, k.P99, k.Max))
		}
		note := fmt.Sprintf("microbatch: state %d rows, %d bytes in memory; %d bytes of state objects written", m.stateRows, m.stateBytes, m.stateWritten)
		if m.stateChanged > 0 && m.stateRows > 0 {
			// The write amplification against the changes: bytes written
			// per changed entry, over an entry's size in memory.
			entry := float64(m.stateBytes) / float64(m.stateRows)
			per := float64(m.stateWritten) / float64(m.stateChanged)
			note += fmt.Sprintf(" for %d changed entries (%.1f bytes each, %.2fx an entry's %.1f bytes in memory)", m.stateChanged, per, per/entry, entry)
		}
		s.Notes = append(s.Notes, note)
	}
	return s
}
