package recordwise

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// An endless run's checkpoint history keeps the newest historyKeep to
// 2×historyKeep checkpoints, and the summary's note still counts every
// completed one, with the exact maximum and in-flight sum.
func TestHistoryBoundedTotalsExact(t *testing.T) {
	o := newObserver(io.Discard)
	start := time.Now()
	o.begin(start)
	const n = 5*historyKeep + 3
	completed := 0
	var inflight int64
	for i := 1; i <= n; i++ {
		st := checkpoint.Stats{ID: checkpoint.ID(i), Status: checkpoint.Completed, Triggered: start,
			Finished: start.Add(time.Duration(i) * time.Millisecond), StateBytes: int64(i), InFlightBytes: 2}
		if i%7 == 0 {
			st.Status, st.Reason = checkpoint.Aborted, checkpoint.Reason(1)
		} else {
			completed++
			inflight += 2
		}
		o.checkpointDone(0, false, st, []TaskCheckpointStats{{Task: "t", AlignmentMs: float64(i % 50)}})
	}
	if h := len(o.report.History); h < historyKeep || h > 2*historyKeep {
		t.Fatalf("history holds %d checkpoints, want %d to %d", h, historyKeep, 2*historyKeep)
	}
	if last := o.report.History[len(o.report.History)-1]; last.ID != n {
		t.Fatalf("newest in history is %d, want %d", last.ID, n)
	}
	s, _ := o.summary(time.Second)
	if o.completed != completed || len(s.Notes) == 0 {
		t.Fatalf("completed %d (want %d); notes %q", o.completed, completed, s.Notes)
	}
	var got, p50 int
	var rest string
	note := s.Notes[len(s.Notes)-1]
	if _, err := fmt.Sscanf(note, "recordwise checkpoints: %d completed, end-to-end p50 %d.", &got, &p50); err != nil {
		t.Fatalf("note %q: %v", note, err)
	}
	// The exact upper median of 1..n without the multiples of 7 is 642;
	// the histogram keeps three significant digits.
	if got != completed || p50 < 636 || p50 > 648 {
		t.Fatalf("note %q: %d completed, p50 %d; want %d and about 642", note, got, p50, completed)
	}
	rest = fmt.Sprintf(" ms, max %.1f ms; alignment max 49.0 ms; last state %d bytes; in-flight data persisted %d bytes in total", float64(n), n, inflight)
	if !strings.Contains(note, rest) {
		t.Fatalf("note %q lacks %q", note, rest)
	}
}
