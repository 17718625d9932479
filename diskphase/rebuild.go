package diskphase

import (
	"fmt"
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/lineage"
)

// A materialised file found missing or corrupt is rebuilt through the same
// planner the micro-batch executor uses for a lost worker's pieces
// (package lineage), so both executors decide what to redo in one place.
//
// The pieces are the map units' outputs of the finite job: one derivation
// per recorded map unit, from its split's input range through its chain
// of stateless steps. Every piece whose files are durable is Materialised,
// which cuts the chain: only the piece with the bad file is lost, and it
// lives nowhere but in storage, so the plan has exactly one task, the
// producing map unit, and re-reads exactly its range. The machine then
// re-runs that unit as before. Reduce outputs carry state and are not
// stateless pieces; a lost one goes straight to its reduce unit.
//
// Both values of --lost-piece-recovery behave the same here: the finite
// job's other files are durable, so nothing but the producing unit was
// lost, and re-running the whole finite job is never needed.

// storageWorker is where a lost file's piece "lived": durable storage, not
// a worker. Planning with it lost marks exactly the bad piece unavailable.
const storageWorker = lineage.WorkerID(-1)

// pieceOf names the piece a map unit's files hold.
func pieceOf(u UnitID) lineage.PieceID { return lineage.PieceID(u.String()) }

// planLostFile returns the unit to re-run for a bad file, decided by
// lineage.Plan. A report the machine will ignore (the unit is already
// being re-run, or the file is not its current one) and a reduce unit's
// file are passed through unplanned.
func (c *coordinator) planLostFile(bad *fileBadError) (UnitID, error) {
	u := c.m.unit(bad.producer)
	if bad.producer.Kind != kindMap || u == nil || u.status != stDone || !entryNames(u, bad.file) {
		return bad.producer, nil
	}
	x := c.x
	js := c.m.jobs[bad.producer.Job]
	g := lineage.NewGraph()
	units := map[lineage.PieceID]UnitID{}
	for _, s := range js.order {
		mu := js.maps[s]
		e := mu.mapEnt
		if mu.status != stDone || e == nil {
			continue
		}
		sp := x.splits[s]
		ic := x.topo.inputs[sp.input]
		ids := make([]string, len(ic.chain))
		for i, st := range ic.chain {
			ids[i] = st.ID
		}
		steps, err := lineage.StepsFor(x.env.Job, ids...)
		if err != nil {
			return UnitID{}, err
		}
		in := lineage.InputRange{Input: ic.name, Partition: sp.partition, End: e.End}
		in.Start.Partition, in.Start.Offset = sp.name, e.Start
		id := pieceOf(mu.id)
		if err := g.Add(lineage.Derivation{ID: id, Input: &in, Steps: steps, Worker: storageWorker, Materialised: mu.id != bad.producer}); err != nil {
			return UnitID{}, err
		}
		units[id] = mu.id
	}
	// No worker was lost: every worker may run the re-derivation.
	survivors := make([]lineage.WorkerID, len(c.m.workers))
	for w := range survivors {
		survivors[w] = lineage.WorkerID(w)
	}
	plan, err := lineage.Plan(g, []lineage.WorkerID{storageWorker}, []lineage.PieceID{pieceOf(bad.producer)}, survivors)
	if err != nil {
		return UnitID{}, fmt.Errorf("rebuilding %s: %w", bad.file, err)
	}
	if len(plan.Tasks) != 1 || units[plan.Tasks[0].Piece.ID] != bad.producer {
		return UnitID{}, fmt.Errorf("internal error: the plan for lost file %s re-derives %d pieces, not the one of %s", bad.file, len(plan.Tasks), bad.producer)
	}
	t := plan.Tasks[0]
	x.lost.planned(units[t.Piece.ID], len(plan.Lost), t.Piece.Input.Records(), time.Now())
	return units[t.Piece.ID], nil
}

// lostPieces are the lost-piece figures of a run; they outlive
// coordinator incarnations, like metrics.
type lostPieces struct {
	mu      sync.Mutex
	pending map[UnitID]pendingPiece
	tally   report.PieceTally
}

type pendingPiece struct {
	at      time.Time
	records int64
}

func (l *lostPieces) planned(u UnitID, lost int, records int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[UnitID]pendingPiece{}
	}
	l.tally.Loss(report.PieceLoss{PiecesLost: lost})
	l.pending[u] = pendingPiece{at: now, records: records}
}

// recorded completes the rebuild of u's piece once its re-run is in the
// ledger; e is its new entry. It returns the progress line, or nil.
func (l *lostPieces) recorded(u UnitID, e *MapEntry, now time.Time) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.pending[u]
	if !ok || e == nil {
		return nil
	}
	delete(l.pending, u)
	wall := now.Sub(p.at)
	l.tally.More(report.PieceLoss{PiecesRebuilt: 1, RecordsReread: e.Records, Wall: wall})
	return map[string]any{"recovery": "lineage", "job": u.Job, "unit": u.String(),
		"pieces_lost": 1, "pieces_rebuilt": 1, "records_reread": e.Records, "planned_records": p.records,
		"rebuild_ms": report.Millis(wall)}
}

func (l *lostPieces) summary() *report.LostPieces { return l.tally.Summary("lineage") }
