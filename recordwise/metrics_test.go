package recordwise

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// A point whose metadata was durable when the coordinator died is entered
// as completed at restore; the progress stream must say so too, or
// `rewind trace` tells a recovery from a checkpoint it never showed.
func TestCompletionNoticedAtRestoreIsAnEvent(t *testing.T) {
	var progress bytes.Buffer
	o := newObserver(&progress)
	at := time.Now()
	zero := time.Duration(0)
	r := o.crash("worker 1 killed", &report.Crash{At: at, Detect: &zero, Acquire: &zero}, at, 1)
	o.restarted(r, RestoreInfo{Attempt: 1, From: 1}, nil, at)
	if o.completed != 1 || o.failed != 0 {
		t.Fatalf("completed %d, failed %d; want the point counted completed, not failed", o.completed, o.failed)
	}
	if !strings.Contains(progress.String(), `"executor":"recordwise","event":"checkpoint","t_ms":`) ||
		!strings.Contains(progress.String(), `"id":1,`) || !strings.Contains(progress.String(), "noticed at restore") {
		t.Fatalf("progress lacks the checkpoint 1 event:\n%s", progress.String())
	}
}

// A resumed process restores a point the earlier process completed: it is
// not one of this process's checkpoints.
func TestResumedRestoreIsNotThisProcessCheckpoint(t *testing.T) {
	var progress bytes.Buffer
	o := newObserver(&progress)
	o.processDied()
	o.restarted(nil, RestoreInfo{From: 5}, map[string]int64{"in/0": 700}, time.Now())
	if o.completed != 0 || len(o.report.History) != 0 {
		t.Fatalf("completed %d, history %v; want none of this process's", o.completed, o.report.History)
	}
	if o.resumedFrom == nil || o.resumedFrom.ID == nil || *o.resumedFrom.ID != 5 || o.resumedFrom.RecordsBefore != 700 {
		t.Fatalf("resumed from %+v, want checkpoint 5 covering 700 records", o.resumedFrom)
	}
}

// Records flowing write a "progress" line at least every progressEvery,
// and a completed checkpoint writes one at once, with the counts so far.
func TestProgressLineWhileRecordsFlowAndAtCheckpoints(t *testing.T) {
	var progress bytes.Buffer
	o := newObserver(&progress)
	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("progress line %q: %v", l, err)
			}
			if m["event"] == "progress" {
				out = append(out, m)
			}
		}
		return out
	}
	o.read("in", "0", 100, 100, o.start.Add(progressEvery/2))
	if progress.Len() != 0 {
		t.Fatalf("a progress line before %v of records: %s", progressEvery, progress.String())
	}
	o.read("in", "0", 250, 150, o.start.Add(progressEvery+progressEvery/2))
	got := lines()
	if len(got) != 1 || got[0]["records_in"] != 250.0 || got[0]["input_rows"] != 250.0 || got[0]["executor"] != "recordwise" ||
		got[0]["t_ms"] != 1500.0 || got[0]["newest_checkpoint"] != nil {
		t.Fatalf("after %v of records: progress lines %v, want one with 250 records in at t_ms 1500", progressEvery, got)
	}
	now := time.Now()
	o.checkpointDone(0, false, checkpoint.Stats{ID: 3, Status: checkpoint.Completed, Triggered: now, Finished: now}, nil)
	got = lines()
	if len(got) != 2 || got[1]["checkpoints_completed"] != 1.0 || got[1]["newest_checkpoint"] != 3.0 || got[1]["input_rows"] != 0.0 {
		t.Fatalf("after checkpoint 3 completed: progress lines %v, want a second naming it", got)
	}
}

// Checkpoints a crash leaves in progress are failed events with the crash
// as their reason, so the history table shows what the failed count says.
func TestCheckpointsCutShortAreFailedEvents(t *testing.T) {
	var progress bytes.Buffer
	o := newObserver(&progress)
	o.cutShort(2, []checkpoint.ID{7, 8}, "worker 1 killed")
	var got []CheckpointStats
	for _, line := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
		var cs CheckpointStats
		if err := json.Unmarshal([]byte(line), &cs); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, cs)
	}
	if len(got) != 2 || got[0].ID != 7 || got[1].ID != 8 {
		t.Fatalf("events %+v, want checkpoints 7 and 8", got)
	}
	for _, cs := range got {
		if cs.Status != "failed" || cs.Attempt != 2 || cs.Reason != "cut short by a crash: worker 1 killed" {
			t.Errorf("checkpoint %d: status %q, attempt %d, reason %q; want failed at attempt 2, cut short by the crash", cs.ID, cs.Status, cs.Attempt, cs.Reason)
		}
	}
	if strings.Contains(progress.String(), "duration_ms") || strings.Contains(progress.String(), "state_bytes") {
		t.Errorf("a checkpoint cut short has no measured duration or size, yet its event gives one:\n%s", progress.String())
	}
}
