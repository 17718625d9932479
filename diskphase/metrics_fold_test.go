package diskphase

import (
	"io"
	"strings"
	"testing"
	"time"
)

// An endless run commits finite jobs without end: the metrics keep the
// newest jobsKept committed jobs' figures and fold the rest into totals,
// so the summary's sums stay exact (the same figures as keeping every
// job: 197 jobs of map 100 ms and commit 200 ms, the last committed twice).
func TestMetricsFoldOldJobs(t *testing.T) {
	start := time.Now()
	m := newMetrics(io.Discard, start)
	const jobs = 3*jobsKept + 5
	for j := range jobs {
		at := start.Add(time.Duration(j) * time.Second)
		m.planned(j, at)
		m.commitStarted(j, at.Add(100*time.Millisecond))
		u := UnitID{Job: j, Kind: kindMap, Index: 0}
		for range 2 { // a re-run of every job's map unit
			rerun, rec := m.attemptStarted(u, at)
			m.recordsRead(u, 10, rerun, rec)
		}
		m.jobCommitted(JobCommit{Job: j, Records: 10}, noWM, at.Add(300*time.Millisecond))
		if j == jobs-1 {
			// A commit repeated after a crash is not a second job.
			m.jobCommitted(JobCommit{Job: j, Records: 10}, noWM, at.Add(300*time.Millisecond))
		}
	}
	if n := len(m.jobs); n != jobsKept {
		t.Fatalf("%d jobs' figures kept, want %d", n, jobsKept)
	}
	if n := len(m.attempts); n != jobsKept {
		t.Fatalf("%d units' attempts kept, want %d", n, jobsKept)
	}
	s := m.summary()
	want := "diskphase: 198 finite jobs (map 19700 ms, reduce 0 ms, commit 39400 ms in total), 394 unit attempts (197 re-runs: 0 interrupted, 0 for lost files), 1970 records re-read"
	note := s.Notes[len(s.Notes)-1]
	if !strings.HasPrefix(note, want) {
		t.Fatalf("note %q, want it to start %q", note, want)
	}
}
