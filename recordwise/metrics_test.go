package recordwise

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A point whose metadata was durable when the coordinator died is entered
// as completed at restore; the progress stream must say so too, or
// `rewind trace` tells a recovery from a checkpoint it never showed.
func TestCompletionNoticedAtRestoreIsAnEvent(t *testing.T) {
	var progress bytes.Buffer
	o := newObserver(&progress)
	at := time.Now()
	r := o.crash("worker 1 killed", at, at, 1)
	o.restarted(r, RestoreInfo{Attempt: 1, From: 1}, nil, at)
	if o.completed != 1 || o.failed != 0 {
		t.Fatalf("completed %d, failed %d; want the point counted completed, not failed", o.completed, o.failed)
	}
	if !strings.Contains(progress.String(), `"event":"checkpoint","id":1,`) || !strings.Contains(progress.String(), "noticed at restore") {
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
