package microbatch

// This file holds what microbatch tells a time-space diagram
// (run.Env.Trace): a lane per stage subtask and one for the coordinator,
// the batches between them, the seams and commits, crashes, restores and
// lost pieces. Every call site checks the recorder for nil first, so an
// ordinary run pays that check alone.

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/lineage"
)

const coordinatorLane = "coordinator"

// stageLane is the lane of subtask w of stage si.
func stageLane(t *topology, si, w int) string { return fmt.Sprintf("%s-%d", t.stages[si].ID, w) }

// declareLanes adds one lane per stage subtask, in stage order, then the
// coordinator's; a restarted coordinator declares the same ones.
func declareLanes(tr *spacetime.Recorder, t *topology, par int) {
	if tr == nil {
		return
	}
	for si, st := range t.stages {
		kind := map[job.Kind]string{job.SourceStage: "source", job.OperatorStage: "operator", job.SinkStage: "sink"}[st.Kind]
		for w := 0; w < par; w++ {
			tr.AddLane(spacetime.Lane{ID: stageLane(t, si, w), Kind: kind, Worker: w, Label: fmt.Sprintf("%s #%d", st.ID, w)})
		}
	}
	tr.AddLane(spacetime.Lane{ID: coordinatorLane, Kind: "coordinator", Worker: -1, Label: "coordinator"})
}

// seamNote lists the offsets logged for a batch: input/partition [start, end).
func seamNote(t *topology, e *offsetsEntry) string {
	var parts []string
	for _, p := range t.parts {
		if p.global < len(e.Ranges) {
			r := e.Ranges[p.global]
			parts = append(parts, fmt.Sprintf("%s/%s [%d,%d)", p.input, p.name, r.Start, r.End))
		}
	}
	return strings.Join(parts, " ")
}

// traceInput records the batches one stage subtask takes from producer
// subtask prod of stage from, replayed when the batch is a re-run or its
// source re-read input.
func (se *stageEnv) traceInput(from, prod, si, w int, rows int64) {
	if rows == 0 {
		return
	}
	se.trace.Record(spacetime.Event{Kind: spacetime.Batch, From: stageLane(se.topo, from, prod), To: stageLane(se.topo, si, w),
		Worker: w, ID: se.plan.Batch, Records: rows, Replay: se.rerun || se.reread[prod]})
}

// tracePieces records the pieces a lineage rebuild lost, on the dead
// worker's lane, and rebuilt, on the survivor's.
func (c *coordinator) tracePieces(tr *spacetime.Recorder, bp *batchPieces, plan lineage.RebuildPlan) {
	where := map[lineage.PieceID]int{}
	for f, slots := range bp.owned {
		for _, ids := range slots {
			for _, id := range ids {
				where[id] = f
			}
		}
	}
	for _, id := range plan.Lost {
		d, _ := bp.graph.Piece(id)
		tr.Record(spacetime.Event{Kind: spacetime.PieceLost, Lane: stageLane(c.topo, where[id], int(d.Worker)), Worker: int(d.Worker),
			ID: c.cur.Batch, Records: bp.ranges[id].Records(), Note: string(id)})
	}
	for _, task := range plan.Tasks {
		tr.Record(spacetime.Event{Kind: spacetime.PieceRebuilt, Lane: stageLane(c.topo, where[task.Piece.ID], int(task.Worker)),
			Worker: int(task.Worker), ID: c.cur.Batch, Records: bp.ranges[task.Piece.ID].Records(), Note: string(task.Piece.ID)})
	}
}

// traceBatchLost records batch id's attempt a crash cut short as a failed
// recovery point on the coordinator's lane, with the reason: failed when
// its offsets were logged (it runs again from them), aborted when not (its
// plan is dropped, and the note says so).
func traceBatchLost(tr *spacetime.Recorder, id int64, logged bool, reason string) {
	if !logged && !strings.Contains(reason, "before its offsets") {
		reason = "aborted before its offsets were logged, " + reason
	}
	tr.Record(spacetime.Event{Kind: spacetime.PointFailed, Lane: coordinatorLane, Worker: -1, ID: id, Note: reason})
}
