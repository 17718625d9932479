package diskphase

import (
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// metrics is the measuring harness of one Run. It lives outside every
// coordinator incarnation (a crashed coordinator's memory is gone, the
// measurements of the run are not) and nothing in it is used to recover:
// recovery reads durable storage only.
type metrics struct {
	mu       sync.Mutex
	progress *report.Progress
	start    time.Time

	recordsIn   int64 // source records read, re-reads included
	rowsOut     int64 // rows handed to the sink, repeated commits included
	distinct    int64 // records of committed finite jobs
	lateRows    int64
	lostRecords int64
	bill        report.Bill
	recoveries  []*recoveryRec
	committed   int
	commitFails int
	latency     *report.LatencyRecorder
	// series is the run over time (run.Env.Series; nil-safe).
	series *report.SeriesRecorder

	jobs map[int]*jobMetrics
	// doneJobs are the committed jobs still in jobs, oldest first; past
	// jobsKept the oldest is folded into folded and forgotten, with its
	// units' attempts, so an endless run's metrics do not grow per job.
	doneJobs  []int
	folded    jobTotals
	attempts  map[UnitID]int
	tags      map[UnitID][]*recoveryRec
	unitsRun  int
	unitsRe   int
	bytesMat  int64
	filesMat  int
	lossRuns  int
	interrupt int
	notes     []string
	// resumedFrom is what the first coordinator of a resumed process found
	// (--resume).
	resumedFrom *report.ResumedFrom
}

// jobsKept is how many committed jobs keep their own figures; a commit
// repeated after a crash is of the newest.
const jobsKept = 64

// jobTotals is the summary's sums over jobs folded away.
type jobTotals struct {
	mapMs, reduceMs, commitMs float64
	recordsReread             int64
}

type jobMetrics struct {
	planAt, reduceAt, commitAt time.Time
	mapMs, reduceMs, commitMs  float64
	bytes                      int64
	files                      int
	unitsRun, unitsRerun       int
	recordsRead, recordsReread int64
	rowsReread                 int64
}

// recoveryRec is the bill of one crash (or of one lost file) with what
// its catch-up waits for: the units it interrupted to be recorded again,
// and the commit it interrupted (commitJob, -1 for none) to succeed.
type recoveryRec struct {
	*report.Crash
	pending   map[UnitID]bool
	commitJob int
}

// newMetrics measures a run that started at start (run.Env.Begin).
func newMetrics(progress io.Writer, start time.Time) *metrics {
	return &metrics{progress: report.NewProgress(progress, "diskphase", start), start: start, bill: report.Bill{Start: start}, latency: report.NewLatencyRecorder(),
		jobs: map[int]*jobMetrics{}, attempts: map[UnitID]int{}, tags: map[UnitID][]*recoveryRec{}}
}

func (m *metrics) job(j int) *jobMetrics {
	jm := m.jobs[j]
	if jm == nil {
		jm = &jobMetrics{}
		m.jobs[j] = jm
	}
	return jm
}

func durPtr(d time.Duration) *time.Duration { return &d }

// newRecovery opens the bill of a crash or a lost file.
func (m *metrics) newRecovery(cause string, at time.Time, loss bool) *recoveryRec {
	m.mu.Lock()
	defer m.mu.Unlock()
	open, event := m.bill.Open, "crash"
	if loss {
		open, event = m.bill.OpenLoss, "file_lost"
	}
	c := open(cause, at)
	c.Reprocessed = new(int64)
	rec := &recoveryRec{Crash: c, pending: map[UnitID]bool{}, commitJob: -1}
	m.recoveries = append(m.recoveries, rec)
	m.progress.EmitAt(event, at, map[string]any{"cause": cause})
	return rec
}

// processDied opens the bill of the earlier process's death; the first
// coordinator of this process completes it (resumedAt). No crash event is
// written (it happened in the earlier process); the restart event carries
// the cause.
func (m *metrics) processDied() *recoveryRec {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := &recoveryRec{Crash: m.bill.ProcessDied(m.start), pending: map[UnitID]bool{}, commitJob: -1}
	m.recoveries = append(m.recoveries, rec)
	return rec
}

// resumedAt completes rec, the earlier process's death, once the first
// coordinator of this process has restored rf in restore.
func (m *metrics) resumedAt(rec *recoveryRec, incarnation int, restore time.Duration, bytes int64, rf *report.ResumedFrom) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec.Restore, rec.RestoreBytes = &restore, &bytes
	m.resumedFrom = rf
	m.progress.Emit("coordinator_restarted", map[string]any{"incarnation": incarnation,
		"restore_ms": report.Millis(restore), "cause": rec.Cause, "resumed_from": rf})
}

// interrupted files unit u as one of the units rec must see recorded again.
func (m *metrics) interrupted(rec *recoveryRec, u UnitID, count bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec.pending[u] = true
	m.tags[u] = append(m.tags[u], rec)
	if count {
		m.interrupt++
	}
}

// settle closes rec's catch-up when nothing it waits for is left.
func (m *metrics) settleLocked(rec *recoveryRec, now time.Time) {
	if rec.CatchUp == nil && len(rec.pending) == 0 && rec.commitJob < 0 {
		rec.CatchUp = durPtr(now.Sub(rec.At))
	}
}

func (m *metrics) settle(rec *recoveryRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleLocked(rec, time.Now())
}

// attemptStarted counts an attempt; it returns whether it is a re-run and
// the newest bill it belongs to.
func (m *metrics) attemptStarted(u UnitID, now time.Time) (rerun bool, rec *recoveryRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts[u]++
	jm := m.job(u.Job)
	jm.unitsRun++
	m.unitsRun++
	if m.attempts[u] > 1 {
		rerun = true
		jm.unitsRerun++
		m.unitsRe++
	}
	if tags := m.tags[u]; len(tags) > 0 {
		rec = tags[len(tags)-1]
		for _, r := range tags {
			if r.Restore == nil && !r.Loss && r.Detect != nil {
				// Time from the replacement ready to the first re-run.
				rs := now.Sub(r.At) - *r.Detect
				if r.Acquire != nil {
					rs -= *r.Acquire
				}
				r.Restore = durPtr(rs)
				// A lost unit is re-run from its input: nothing is
				// loaded from storage before it starts.
				var none int64
				r.RestoreBytes = &none
			}
		}
	}
	return rerun, rec
}

func (m *metrics) recordsRead(u UnitID, n int64, rerun bool, rec *recoveryRec) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recordsIn += n
	jm := m.job(u.Job)
	jm.recordsRead += n
	if rerun {
		jm.recordsReread += n
	}
	if rec != nil && rec.Reprocessed != nil {
		*rec.Reprocessed += n
	}
}

func (m *metrics) rowsReread(u UnitID, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.job(u.Job).rowsReread += n
}

func (m *metrics) materialised(j int, bytes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	jm := m.job(j)
	jm.bytes += int64(bytes)
	jm.files++
	m.bytesMat += int64(bytes)
	m.filesMat++
}

func (m *metrics) lossRerun() {
	m.mu.Lock()
	m.lossRuns++
	m.mu.Unlock()
}

// recorded notes a durable ledger entry.
func (m *metrics) recorded(u UnitID, lost int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lostRecords += lost
	now := time.Now()
	for _, rec := range m.tags[u] {
		delete(rec.pending, u)
		m.settleLocked(rec, now)
	}
	delete(m.tags, u)
}

func (m *metrics) planned(j int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if jm := m.job(j); jm.planAt.IsZero() {
		jm.planAt = now
	}
}

func (m *metrics) reducePhase(j int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if jm := m.job(j); jm.reduceAt.IsZero() {
		jm.reduceAt = now
	}
}

func (m *metrics) commitStarted(j int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if jm := m.job(j); jm.commitAt.IsZero() {
		jm.commitAt = now
	}
}

func (m *metrics) rowsWritten(n int64) {
	m.mu.Lock()
	m.rowsOut += n
	m.mu.Unlock()
}

// visibleLatency records n records that became visible at now, d after
// they were handed over.
func (m *metrics) visibleLatency(now time.Time, d time.Duration, n int64) {
	m.mu.Lock()
	m.latency.Record(d, n)
	m.mu.Unlock()
	m.series.Visible(now, 1, func(int) (time.Duration, int64) { return d, n })
}

// jobCommitted closes job j's metrics and prints its progress line.
func (m *metrics) jobCommitted(c JobCommit, wm int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.committed++
	m.distinct += c.Records
	m.lateRows += c.LateRows
	jm := m.job(c.Job)
	ms := func(a, b time.Time) float64 {
		if a.IsZero() || b.IsZero() {
			return 0
		}
		return float64(b.Sub(a).Microseconds()) / 1000
	}
	phaseEnd := jm.reduceAt
	if phaseEnd.IsZero() { // map-only
		phaseEnd = jm.commitAt
	}
	jm.mapMs = ms(jm.planAt, phaseEnd)
	if !jm.reduceAt.IsZero() {
		jm.reduceMs = ms(jm.reduceAt, jm.commitAt)
	}
	jm.commitMs = ms(jm.commitAt, now)
	// A finite job's duration as a recovery point is from its input being
	// cut (the map phase's end: its reading lasts the job interval) to
	// its commit, as a checkpoint's runs from its trigger to durable.
	m.series.PointTook("finite job", int64(c.Job), report.PointCompleted, time.Duration(ms(phaseEnd, now)*float64(time.Millisecond)))
	for _, rec := range m.recoveries {
		if rec.commitJob == c.Job {
			rec.commitJob = -1
			m.settleLocked(rec, now)
		}
	}
	line := map[string]any{
		"job": c.Job, "records": c.Records, "rows_out": c.RowsOut, "late_rows": c.LateRows,
		"map_ms": jm.mapMs, "reduce_ms": jm.reduceMs, "commit_ms": jm.commitMs, "duration_ms": ms(jm.planAt, now),
		"bytes_materialised": jm.bytes, "files_materialised": jm.files,
		"units_run": jm.unitsRun, "units_rerun": jm.unitsRerun,
		"records_read": jm.recordsRead, "records_reread": jm.recordsReread, "rows_reread": jm.rowsReread,
	}
	if wm != noWM {
		line["watermark"] = wm
	}
	m.progress.Emit("job_committed", line)
	m.retire(c.Job)
}

// retire notes job j committed and folds the oldest committed job past
// jobsKept into the totals. m.mu is held.
func (m *metrics) retire(j int) {
	for _, d := range m.doneJobs {
		if d == j {
			return // a commit repeated after a crash
		}
	}
	m.doneJobs = append(m.doneJobs, j)
	if len(m.doneJobs) <= jobsKept {
		return
	}
	old := m.doneJobs[0]
	m.doneJobs = append(m.doneJobs[:0], m.doneJobs[1:]...)
	if jm := m.jobs[old]; jm != nil {
		m.folded.mapMs += jm.mapMs
		m.folded.reduceMs += jm.reduceMs
		m.folded.commitMs += jm.commitMs
		m.folded.recordsReread += jm.recordsReread
		delete(m.jobs, old)
	}
	for u := range m.attempts {
		if u.Job == old {
			delete(m.attempts, u)
		}
	}
}

// noWM avoids importing operator here for one constant.
const noWM = -1 << 63

// emit writes one progress event.
func (m *metrics) emit(event string, fields map[string]any) { m.progress.Emit(event, fields) }

// summary builds the run's summary.
func (m *metrics) summary() *report.Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	wall := time.Since(m.start)
	s := &report.Summary{
		RecordsIn: m.recordsIn, RowsOut: m.rowsOut, LostRecords: m.lostRecords, LateRows: m.lateRows,
		Crashes:     m.bill.Crashes(),
		Checkpoints: &report.Checkpoints{Completed: m.committed, Failed: m.commitFails},
		LatencyMs:   m.latency.Latency(),
		WallMs:      report.Millis(wall),
		ResumedFrom: m.resumedFrom,
	}
	if wall > 0 {
		s.ThroughputRPS = float64(m.distinct) / wall.Seconds()
	}
	s.Recoveries = m.bill.Recoveries()
	s.Notes = append(s.Notes, m.notes...)
	mapMs, redMs, comMs := m.folded.mapMs, m.folded.reduceMs, m.folded.commitMs
	reread := m.folded.recordsReread
	for _, jm := range m.jobs {
		mapMs, redMs, comMs = mapMs+jm.mapMs, redMs+jm.reduceMs, comMs+jm.commitMs
		reread += jm.recordsReread
	}
	s.Notes = append(s.Notes, fmt.Sprintf("diskphase: %d finite jobs (map %.0f ms, reduce %.0f ms, commit %.0f ms in total), %d unit attempts (%d re-runs: %d interrupted, %d for lost files), %d records re-read, %d files / %d bytes materialised",
		m.committed, mapMs, redMs, comMs, m.unitsRun, m.unitsRe, m.interrupt, m.lossRuns, reread, m.filesMat, m.bytesMat))
	return s
}

// jobTable returns per-job metrics in job order (for tests and benches):
// the jobs not yet committed and the newest jobsKept committed.
func (m *metrics) jobTable() []jobMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int, 0, len(m.jobs))
	for j := range m.jobs {
		ids = append(ids, j)
	}
	sort.Ints(ids)
	out := make([]jobMetrics, len(ids))
	for i, j := range ids {
		out[i] = *m.jobs[j]
	}
	return out
}
