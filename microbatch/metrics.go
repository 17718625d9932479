package microbatch

import (
	"encoding/json"
	"fmt"
	"io"
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
	progress io.Writer
	lat      *report.LatencyRecorder
	// The end-to-end latency split in two: hand-over to the plan of the
	// batch that takes the record (waiting for a trigger, or for the
	// previous batch to end), and plan to visibility (the batch's own work).
	latWait, latWork *report.LatencyRecorder

	recordsIn atomic.Int64

	mu              sync.Mutex
	rowsOut         int64
	committed       int
	failed, aborted int
	crashes         int
	lost            int64
	lateRows        int64
	committedRows   int64
	recoveries      []*recovery
	steps           stepTotals
	stateRows       int64
	stateBytes      int64
	stateWritten    int64
	fullSnapshots   int
	lastPlanStart   time.Time
	progressErr     error
	// recoveryMode is the lost-piece recovery in force; lp its figures.
	recoveryMode string
	lp           lostPieceMetrics
	notes        []string
	// resumed is the bill of the earlier process's death (--resume), and
	// resumedFrom what the first restore of this process found.
	resumed     *recovery
	resumedFrom *report.ResumedFrom
}

// recovery is the bill of one crash, filled in as recovery proceeds.
type recovery struct {
	cause     string
	crashAt   time.Time
	detect    *time.Duration
	restore   *time.Duration
	reprocess *int64
	catchUp   *time.Duration
	// highWater are the read positions when the crash happened; catch-up
	// is complete when a committed batch covers them and was not cut short
	// by --max-batch-records.
	highWater []int64
	// earlier: the death of the process before this one (--resume). Its
	// detection and what it cut short are unknown; only the restore is
	// measured.
	earlier bool
}

type stepTotals struct {
	n                                                int
	plan, offsets, run, state, sink, commit, publish time.Duration
}

func newMetrics(progress io.Writer) *metrics {
	return &metrics{start: time.Now(), progress: progress, lat: report.NewLatencyRecorder(),
		latWait: report.NewLatencyRecorder(), latWork: report.NewLatencyRecorder()}
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
	m.crashes++
	r := &recovery{cause: cause, crashAt: at, highWater: highWater}
	m.recoveries = append(m.recoveries, r)
	m.event(map[string]any{"event": "crash", "cause": cause, "elapsed_ms": ms(at.Sub(m.start))})
	return r
}

// processDied opens the bill of the earlier process's death; the first
// restore completes it. Run's start stands for the crash: nothing earlier
// is known, and no crash event is written (it happened in the earlier
// process); the recovery event carries the cause.
func (m *metrics) processDied() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashes++
	m.resumed = &recovery{cause: report.CauseProcessDied, crashAt: m.start, earlier: true}
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

// batchLost counts a batch attempt a crash cut short: failed if its
// offsets were logged (it runs again with them), aborted if only planned.
func (m *metrics) batchLost(logged bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if logged {
		m.failed++
	} else {
		m.aborted++
	}
}

// recovered completes the detection and restore figures of r.
// Every other crash not yet repaired that happened before restoreStart
// (a second kill of a worker already down, a kill while the coordinator
// was down) is repaired by the same recovery and shares its figures, with
// nothing reprocessed on its account.
func (m *metrics) recovered(r *recovery, restoreStart, restoreEnd time.Time, reprocessed int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.recoveries {
		if o.restore != nil || o.crashAt.After(restoreStart) {
			continue
		}
		rs := restoreEnd.Sub(restoreStart)
		if o.earlier {
			o.restore = &rs
			m.event(map[string]any{"event": "recovery", "cause": o.cause, "detect_ms": nil, "restore_ms": ms(rs),
				"reprocessed_records": nil, "resumed_from": m.resumedFrom})
			continue
		}
		d := restoreStart.Sub(o.crashAt)
		rp := int64(0)
		if o == r {
			rp = reprocessed
		}
		o.detect, o.restore, o.reprocess = &d, &rs, &rp
		m.event(map[string]any{"event": "recovery", "cause": o.cause, "detect_ms": ms(d), "restore_ms": ms(rs),
			"reprocessed_records": rp})
	}
}

// lostPieces records one lost-piece recovery (lineage.go).
func (m *metrics) lostPieces(r lostPieceReport) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lp.recoveries++
	m.lp.piecesLost += r.piecesLost
	m.lp.piecesRebuilt += r.piecesRebuilt
	m.lp.recordsReread += r.recordsReread
	m.lp.wall += r.wall
	lost := make([]int, len(r.lost))
	for i, w := range r.lost {
		lost[i] = int(w)
	}
	surv := make([]int, len(r.survivors))
	for i, w := range r.survivors {
		surv[i] = int(w)
	}
	m.event(map[string]any{"event": "lost_pieces", "recovery": r.mode, "batch_id": r.batch, "lost_workers": lost,
		"survivors": surv, "pieces_lost": r.piecesLost, "pieces_rebuilt": r.piecesRebuilt,
		"records_reread": r.recordsReread, "rebuild_ms": ms(r.wall), "pieces": r.pieces()})
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
	if b.full {
		m.fullSnapshots++
	}
	for _, r := range m.recoveries {
		if r.catchUp != nil || b.capped || r.highWater == nil {
			continue
		}
		covered := len(b.ends) == len(r.highWater)
		for i := 0; covered && i < len(b.ends); i++ {
			covered = b.ends[i] >= r.highWater[i]
		}
		if covered {
			d := now.Sub(r.crashAt)
			r.catchUp = &d
		}
	}
	if m.progress == nil {
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
	m.event(map[string]any{
		"event":                     "batch",
		"batch_id":                  b.batch,
		"rerun":                     b.rerun,
		"planned_ahead":             b.plannedAhead,
		"timestamp":                 b.planStart.UTC().Format(time.RFC3339Nano),
		"input_rows":                b.inputRows,
		"input_rows_per_second":     inRate,
		"processed_rows_per_second": procRate,
		"rows_out":                  b.rowsOut,
		"late_rows":                 b.lateRows,
		"durations_ms": map[string]float64{
			"plan": ms(b.steps.plan), "offsets_log": ms(b.steps.offsets), "run": ms(b.steps.run),
			"state_commit": ms(b.steps.state), "sink": ms(b.steps.sink), "commit_log": ms(b.steps.commit),
			"publish": ms(b.steps.publish), "total": ms(b.total),
		},
		"state_rows":          b.stateRows,
		"state_bytes":         b.stateBytes,
		"state_written_bytes": b.stateWritten,
		"state_version":       b.stateVersion,
		"full_snapshot":       b.full,
		"watermark":           b.watermark,
		"sources":             srcs,
	})
}

// event writes one progress line; m.mu is held.
func (m *metrics) event(v map[string]any) {
	if m.progress == nil || m.progressErr != nil {
		return
	}
	line, err := json.Marshal(v)
	if err == nil {
		_, err = fmt.Fprintf(m.progress, "%s\n", line)
	}
	m.progressErr = err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func msp(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	v := ms(*d)
	return &v
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
		Crashes:     m.crashes,
		Checkpoints: &report.Checkpoints{Completed: m.committed, Failed: m.failed, Aborted: m.aborted},
		LatencyMs:   m.lat.Latency(),
		WallMs:      ms(wall),
		ResumedFrom: m.resumedFrom,
	}
	if wall > 0 {
		s.ThroughputRPS = float64(m.committedRows) / wall.Seconds()
	}
	s.LostPieces = &report.LostPieces{Recovery: m.recoveryMode, Recoveries: m.lp.recoveries, PiecesLost: m.lp.piecesLost,
		PiecesRebuilt: m.lp.piecesRebuilt, RecordsReread: m.lp.recordsReread}
	if m.lp.recoveries > 0 {
		s.LostPieces.RebuildMs = msp(&m.lp.wall)
	}
	s.Notes = append(s.Notes, m.notes...)
	for _, r := range m.recoveries {
		cause := r.cause
		if r.restore == nil {
			cause += "; no recovery ran: the run ended first"
		}
		s.Recoveries = append(s.Recoveries, report.Recovery{Cause: cause, DetectMs: msp(r.detect),
			RestoreMs: msp(r.restore), ReprocessedRecords: r.reprocess, CatchUpMs: msp(r.catchUp)})
	}
	if n := m.steps.n; n > 0 {
		avg := func(d time.Duration) float64 { return ms(d) / float64(n) }
		s.Notes = append(s.Notes, fmt.Sprintf("microbatch: %d batches committed (%d full state snapshots); mean step ms: plan %.3f, offsets log %.3f, run %.3f, state commit %.3f, sink %.3f, commit log %.3f, publish %.3f",
			m.committed, m.fullSnapshots, avg(m.steps.plan), avg(m.steps.offsets), avg(m.steps.run), avg(m.steps.state),
			avg(m.steps.sink), avg(m.steps.commit), avg(m.steps.publish)))
		if w, k := m.latWait.Latency(), m.latWork.Latency(); w != nil && k != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("microbatch: latency split p50/p99/max ms: hand-over to plan %.1f/%.1f/%.1f, plan to visible %.1f/%.1f/%.1f",
				w.P50, w.P99, w.Max, k.P50, k.P99, k.Max))
		}
		s.Notes = append(s.Notes, fmt.Sprintf("microbatch: state %d rows, %d bytes in memory; %d bytes of state objects written", m.stateRows, m.stateBytes, m.stateWritten))
	}
	return s
}
