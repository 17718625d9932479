package microbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/lineage"
)

// Lost-piece recovery: what happens when a worker dies while a batch runs.
//
// A stateless piece is the output of one source-rooted chain of stateless
// stages (the source, then forward, one-input Stateless operators: filter,
// project) for one source partition's range in the batch. It lives in the
// memory of the worker that owns the partition and dies with it.
//
// With RecoveryLineage the batch is not rolled back. When the stage loop
// finds a dead worker after stage k, the coordinator
//
//  1. drops everything the dead worker held (its queues, operators, sink
//     writer and its outputs of stages up to k, including its side of the
//     hash exchanges), and starts a replacement whose stateful operators
//     are restored from the committed state version, for its key groups
//     only;
//  2. records a lineage.Derivation per piece of the batch (input range,
//     chain steps, owning worker) and asks lineage.Plan for the minimal set
//     to rebuild: exactly the dead worker's pieces, spread by load over the
//     surviving workers, which re-read the ranges from the re-readable
//     source (lineage.Rebuild);
//  3. hands the rebuilt pieces to the replacement, in the dead worker's
//     slot, in partition order, and splits them again for the hash
//     exchange, so every consumer receives the same rows in the same order
//     as before;
//  4. re-runs, on the replacement, the dead worker's part of the other
//     stages up to k: for a keyed stage that is its key-group range of the
//     batch, on top of the previous committed state version (the state the
//     dead worker had absorbed of this batch is gone with it), fed by the
//     survivors' exchange output, which stayed in their memory, and by the
//     rebuilt pieces;
//  5. continues the batch at stage k+1 on every worker.
//
// Survivors keep their state, their read-ahead and their sink writers: the
// batch is delivered to the sink once. A loss detected outside the stage
// loop (while committing, sinking, ...) still rolls back and re-runs the
// batch: by then the batch's pieces are consumed and its state absorbed.
// Without a survivor (parallelism 1) there is nobody to rebuild on, and
// the batch is re-run as with RecoveryRerunBatch.

// Values of Options.LostPieceRecovery and --lost-piece-recovery.
const (
	RecoveryLineage    = "lineage"
	RecoveryRerunBatch = "rerun-batch"
)

func resolveRecovery(opt, cfg string, process bool) (bool, error) {
	v := opt
	if v == "" {
		v = cfg
	}
	switch {
	case v == "" && process:
		return false, nil // the only recovery worker processes have
	case v == RecoveryLineage && process:
		// Lineage rebuilds a dead worker's pieces from the survivors'
		// memory, which is in other processes.
		return false, run.RefusedError{Err: fmt.Errorf("--lost-piece-recovery %s: with --workers process microbatch recovers by %s only (the replacement restores and the batch runs again); give --lost-piece-recovery %s or --workers inproc", RecoveryLineage, RecoveryRerunBatch, RecoveryRerunBatch)}
	}
	switch v {
	case "", RecoveryLineage:
		return true, nil
	case RecoveryRerunBatch:
		return false, nil
	}
	return false, fmt.Errorf("lost piece recovery %q: allowed are %s, %s", v, RecoveryLineage, RecoveryRerunBatch)
}

// pieceChain is one source-rooted chain of stateless stages.
type pieceChain struct {
	input  string
	stages []int // stage indexes: the source stage, then the operators
}

// pieceChains returns the stateless chains of t.
func pieceChains(t *topology) []pieceChain {
	var out []pieceChain
	for si, st := range t.stages {
		if st.Kind != job.SourceStage {
			continue
		}
		ch := pieceChain{input: st.Input, stages: []int{si}}
		for cur := st; ; {
			cons := t.job.Consumers(cur.ID)
			if len(cons) != 1 {
				break
			}
			n := cons[0].Stage
			if n.Kind != job.OperatorStage || !n.Stateless || len(n.Inputs) != 1 || cons[0].Edge.Exchange != job.Forward {
				break
			}
			ch.stages = append(ch.stages, t.index[n.ID])
			cur = n
		}
		out = append(out, ch)
	}
	return out
}

// frontier returns the last stage of ch that ran before stage done, or -1.
func (ch pieceChain) frontier(done int) int {
	f := -1
	for _, si := range ch.stages {
		if si < done {
			f = si
		}
	}
	return f
}

// steps returns the lineage steps that lead from the source to stage f.
func (ch pieceChain) steps(t *topology, f int) ([]lineage.Step, error) {
	var ids []string
	for _, si := range ch.stages[1:] {
		if si <= f {
			ids = append(ids, t.stages[si].ID)
		}
	}
	return lineage.StepsFor(t.job, ids...)
}

// checkLineage refuses, before the run starts, a job whose stateless
// chains contain a step that is not deterministic: a lost piece of it
// could not be rebuilt byte for byte.
func checkLineage(t *topology) error {
	for _, ch := range pieceChains(t) {
		steps, err := ch.steps(t, ch.stages[len(ch.stages)-1])
		if err != nil {
			return err
		}
		for _, s := range steps {
			if !s.Deterministic {
				return fmt.Errorf("--lost-piece-recovery %s: stage %q of job %s: %w (use %s)",
					RecoveryLineage, s.Stage, t.job.Name, lineage.ErrNondeterministic, RecoveryRerunBatch)
			}
		}
	}
	return nil
}

// batchPieces holds the derivation of every non-empty piece of the
// current batch, cut at the last stage of its chain that ran before stage
// done (the chain's frontier), and where each piece sits.
type batchPieces struct {
	graph  *lineage.Graph
	all    []lineage.PieceID
	ranges map[lineage.PieceID]lineage.InputRange
	// owned[frontier stage][worker] are the pieces in that slot, in order.
	owned map[int][][]lineage.PieceID
}

func (c *coordinator) batchPieces(done int) (*batchPieces, error) {
	bp := &batchPieces{graph: lineage.NewGraph(), ranges: map[lineage.PieceID]lineage.InputRange{}, owned: map[int][][]lineage.PieceID{}}
	for _, ch := range pieceChains(c.topo) {
		f := ch.frontier(done)
		if f < 0 {
			continue
		}
		steps, err := ch.steps(c.topo, f)
		if err != nil {
			return nil, err
		}
		bp.owned[f] = make([][]lineage.PieceID, c.par)
		for _, p := range c.topo.parts {
			rg := c.cur.Ranges[p.global]
			if p.input != ch.input || rg.End <= rg.Start {
				continue
			}
			in := lineage.InputRange{Input: p.input, Partition: p.index, End: rg.End}
			in.Start.Partition, in.Start.Offset = p.name, rg.Start
			id := lineage.PieceID(fmt.Sprintf("b%d/%s/%s", c.cur.Batch, c.topo.stages[f].ID, p.name))
			if err := bp.graph.Add(lineage.Derivation{ID: id, Input: &in, Steps: steps, Worker: lineage.WorkerID(p.owner)}); err != nil {
				return nil, err
			}
			bp.all = append(bp.all, id)
			bp.ranges[id] = in
			bp.owned[f][p.owner] = append(bp.owned[f][p.owner], id)
		}
	}
	return bp, nil
}

// recoverLostPieces handles the workers found dead after stage done-1 of
// the running batch. It returns false when the batch must be rolled back
// instead (rerun-batch, or nobody survives to rebuild on).
func (c *coordinator) recoverLostPieces(ctx context.Context, se *stageEnv, done int, errs []error) (bool, error) {
	for i, err := range errs {
		stopped := errors.Is(err, errWorkerKilled) || errors.Is(err, errPeerDied)
		if err != nil && !stopped && !c.workers[i].dead() {
			return false, err
		}
	}
	for i := range errs {
		if c.workers[i].dead() {
			errs[i] = nil // what a dead worker said dies with it
		}
	}
	if !c.opts.lineage {
		return false, c.noteRerun(done)
	}
	for round := 0; c.anyDead(); round++ {
		if round > len(c.workers) {
			return false, nil // workers keep dying: roll back instead
		}
		ok, err := c.rebuildRound(ctx, se, done)
		if err != nil || !ok {
			return ok, err
		}
	}
	return true, nil
}

// rebuildRound repairs the workers dead now (steps 1-4 above).
func (c *coordinator) rebuildRound(ctx context.Context, se *stageEnv, done int) (bool, error) {
	noticed := time.Now()
	c.opts.hooks.midRepair("scan", c.killFor)
	deadSet, scanned := c.deadNow()
	dead, alive := c.split(deadSet)
	if len(alive) == 0 {
		c.met.note(fmt.Sprintf("lineage: batch %d lost every worker, so nobody could rebuild its pieces; the batch was re-run", c.cur.Batch))
		return false, c.noteRerun(done)
	}
	hw := c.takeDeaths(deadSet)
	waited, start := c.replacement(ctx, noticed, scanned)
	read := c.stateRead()

	// 1. Everything the dead workers held is dropped.
	bd := se.bd
	// The rows a rebuilt piece holds were handed over when the dead worker
	// first read them: latency counts from then, crash included.
	handedOver := map[int][]handoverRows{}
	for _, d := range dead {
		id := int(d)
		handedOver[id] = bd.handover[id]
		c.workers[id].teardown()
		for s := range done {
			releaseAll(bd.out[s][id])
			bd.out[s][id] = nil
			for col, prod := range bd.hashed[s] {
				for _, bs := range prod[id] {
					releaseAll(bs)
				}
				bd.hashed[s][col][id] = nil
			}
		}
		// What its sink writer held was never flushed: the replacement's
		// re-run counts those rows again.
		bd.handover[id], bd.rowsIn[id], bd.rowsOut[id], bd.late[id] = nil, 0, 0, 0
	}
	ids := make([]int, len(dead))
	for i, d := range dead {
		ids[i] = int(d)
	}
	if err := c.replaceWorkers(ctx, ids); err != nil {
		return false, err
	}
	c.opts.hooks.midRepair("replaced", c.killFor)

	// 2. Plan and rebuild the lost pieces on the survivors.
	bp, err := c.batchPieces(done)
	if err != nil {
		return false, err
	}
	plan, err := lineage.Plan(bp.graph, dead, bp.all, alive)
	if err != nil {
		return false, fmt.Errorf("batch %d: %w", c.cur.Batch, err)
	}
	if tr := c.env.Trace; tr != nil {
		c.tracePieces(tr, bp, plan)
	}
	res, err := lineage.Rebuild(ctx, plan, lineage.Env{Job: c.env.Job, Sources: c.env.Sources, Alloc: c.alloc, ReadRows: c.opts.readRows})
	if err != nil {
		return false, fmt.Errorf("batch %d: %w", c.cur.Batch, err)
	}
	defer res.Release()

	// 3. The replacements take the rebuilt pieces in the dead slots.
	now := time.Now()
	for f, slots := range bp.owned {
		for _, d := range dead {
			id := int(d)
			for _, pid := range slots[id] {
				bd.out[f][id] = append(bd.out[f][id], res.Pieces[pid]...)
				delete(res.Pieces, pid) // ownership moves to the batch
				// The rebuild read the piece's input again: the batch took
				// it a second time (run.Traits.OwnPositions).
				rg := bp.ranges[pid]
				c.env.SeriesInput(rg.Input).Took(rg.Partition, rg.Start.Offset, rg.End)
				n := bp.ranges[pid].Records()
				if len(handedOver[id]) == 0 {
					// The worker died before handing anything over.
					bd.handover[id] = append(bd.handover[id], handoverRows{at: now, rows: n})
				}
				bd.rowsIn[id] += n
			}
			if hs := handedOver[id]; len(hs) > 0 {
				bd.handover[id], handedOver[id] = hs, nil
			}
			for _, col := range c.topo.hashOut[f] {
				parts, err := splitByOwner(c.alloc, bd.out[f][id], col, c.par)
				if err != nil {
					return false, fmt.Errorf("stage %s subtask %d: hash exchange on %s: %w", c.topo.stages[f].ID, id, col, err)
				}
				bd.hashed[f][col][id] = parts
			}
		}
	}

	// 4. The dead workers' part of every other stage that already ran.
	for s := range done {
		if inChain(c.topo, s) {
			continue
		}
		for _, d := range dead {
			// A replacement killed meanwhile is repaired by the next round.
			if err := c.workers[d].runStage(se, s); err != nil && !errors.Is(err, errWorkerKilled) {
				return false, err
			}
		}
	}

	// Besides the lost pieces (read again by the rebuild, from sources of
	// its own), the replacements' readers open at the last committed
	// position and read again what the dead readers had read from there.
	reread := c.reprocessedRecords(hw, func(w int) bool { return deadSet[w] }, false)
	repaired, pending := c.takeRecoveries(scanned)
	c.met.recovered(repaired, pending, waited, start, time.Now(), res.Loss.RecordsReread+reread, c.stateRead()-read)
	c.env.Trace.Record(spacetime.Event{Kind: spacetime.Restore, Lane: coordinatorLane, Worker: -1, ID: c.committed,
		Note: fmt.Sprintf("replaced the dead workers; batch %d goes on with the lost pieces rebuilt", c.cur.Batch)})
	c.met.lostPieces(lostPieceReport{
		mode: RecoveryLineage, batch: c.cur.Batch, lost: dead, survivors: alive, loss: res.Loss,
		plan: &plan, ranges: bp.ranges,
	})
	return true, nil
}

// split splits the workers by whether they are in dead.
func (c *coordinator) split(deadSet map[int]bool) (dead, alive []lineage.WorkerID) {
	for _, w := range c.workers {
		if deadSet[w.id] {
			dead = append(dead, lineage.WorkerID(w.id))
		} else {
			alive = append(alive, lineage.WorkerID(w.id))
		}
	}
	return dead, alive
}

// inChain reports whether stage s belongs to a stateless chain.
func inChain(t *topology, s int) bool {
	for _, ch := range pieceChains(t) {
		if slices.Contains(ch.stages, s) {
			return true
		}
	}
	return false
}

// noteRerun records, for rerun-batch, what re-running the batch redoes in
// the terms of lineage: the dead workers' pieces are lost, every piece of
// the batch is derived again. The rebuild time is the re-run's run step,
// recorded when it ends (rerunDone).
func (c *coordinator) noteRerun(done int) error {
	bp, err := c.batchPieces(done)
	if err != nil {
		return err
	}
	deadSet, _ := c.deadNow()
	dead, alive := c.split(deadSet)
	lost, err := lineage.Plan(bp.graph, dead, nil, alive)
	if err != nil {
		return err
	}
	all, err := lineage.PlanRerun(bp.graph, bp.all, []lineage.WorkerID{0})
	if err != nil {
		return err
	}
	r := c.rerunReport
	if r == nil {
		// A second loss before the re-run ended adds to the same bill.
		r = &lostPieceReport{mode: RecoveryRerunBatch, batch: c.cur.Batch}
	}
	r.lost = append(r.lost, dead...)
	r.survivors = alive
	r.loss.PiecesLost += len(lost.Lost)
	r.loss.PiecesRebuilt += len(all.Tasks)
	for _, t := range all.Tasks {
		r.loss.RecordsReread += t.Piece.Input.Records()
	}
	c.rerunReport = r
	return nil
}

// rerunDone completes the figures noteRerun started, once the re-run of
// the batch has run (wall is its run step).
func (c *coordinator) rerunDone(wall time.Duration) {
	if r := c.rerunReport; r != nil {
		c.rerunReport = nil
		r.loss.Wall = wall
		c.met.lostPieces(*r)
	}
}

// lostPieceReport is one lost-piece recovery, for the progress line and
// the summary.
type lostPieceReport struct {
	mode      string
	batch     int64
	lost      []lineage.WorkerID
	survivors []lineage.WorkerID
	loss      report.PieceLoss
	plan      *lineage.RebuildPlan
	ranges    map[lineage.PieceID]lineage.InputRange
}

// pieceLine is one rebuilt piece in a progress line.
type pieceLine struct {
	ID        string `json:"id"`
	Input     string `json:"input"`
	Partition string `json:"partition"`
	Start     int64  `json:"start_offset"`
	End       int64  `json:"end_offset"`
	Worker    int    `json:"rebuilt_on"`
}

func (r lostPieceReport) pieces() []pieceLine {
	out := []pieceLine{}
	if r.plan == nil {
		return out
	}
	for _, t := range r.plan.Tasks {
		in := r.ranges[t.Piece.ID]
		out = append(out, pieceLine{ID: string(t.Piece.ID), Input: in.Input, Partition: in.Start.Partition,
			Start: in.Start.Offset, End: in.End, Worker: int(t.Worker)})
	}
	return out
}
