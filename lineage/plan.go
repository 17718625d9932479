package lineage

import (
	"fmt"
	"slices"
)

// Task is one piece to rebuild and the surviving worker that rebuilds it.
type Task struct {
	Piece  Derivation `json:"piece"`
	Worker WorkerID   `json:"worker"`
}

// RebuildPlan is what Plan decided. It is a plain value, so an executor can
// log it before acting on it.
type RebuildPlan struct {
	// Lost are the pieces whose only copy was on a lost worker (not
	// materialised), in graph order, whether or not anything still needs
	// them.
	Lost []PieceID `json:"lost"`
	// Tasks are the pieces that must be rebuilt so every needed piece is
	// available again, parents before children. Nothing outside the chains
	// that lead from a needed piece back to an available piece (or to the
	// input) is in it.
	Tasks []Task `json:"tasks"`
	// Fetch are the available pieces the tasks read as parents: alive on a
	// survivor or materialised. The executor hands them to Rebuild.
	Fetch []PieceID `json:"fetch,omitempty"`
	// Survivors are the workers the tasks were spread over.
	Survivors []WorkerID `json:"survivors"`
}

// Plan returns the minimal set of pieces that must be rebuilt after the
// workers in lost died, so that every piece in needed is available again,
// in dependency order and spread over survivors. A piece is available when
// it is materialised or lives on a worker that is not lost; the walk from
// a needed piece stops at available pieces (and at the input), which is
// why materialising a piece bounds how far back a rebuild reaches.
//
// Plan is a pure function of its arguments. It refuses, with an error
// wrapping ErrNondeterministic, any plan that would re-run a step that is
// not deterministic, and with ErrNoSurvivors a plan with work and nobody
// to do it.
func Plan(g *Graph, lost []WorkerID, needed []PieceID, survivors []WorkerID) (RebuildPlan, error) {
	dead := map[WorkerID]bool{}
	for _, w := range lost {
		dead[w] = true
	}
	seenSurvivor := map[WorkerID]bool{}
	for _, w := range survivors {
		if dead[w] {
			return RebuildPlan{}, fmt.Errorf("lineage: worker %d is both lost and a survivor", w)
		}
		if seenSurvivor[w] {
			return RebuildPlan{}, fmt.Errorf("lineage: survivor %d listed twice", w)
		}
		seenSurvivor[w] = true
	}
	available := func(d *Derivation) bool { return d.Materialised || !dead[d.Worker] }

	var p RebuildPlan
	for _, id := range g.order {
		if d := g.pieces[id]; !available(d) {
			p.Lost = append(p.Lost, id)
		}
	}

	// Depth-first from each needed piece; post-order emission puts parents
	// before children. The graph is acyclic by construction (Add), so no
	// cycle check is needed.
	var order []*Derivation
	visited := map[PieceID]bool{}
	fetched := map[PieceID]bool{}
	var visit func(id PieceID, from PieceID) error
	visit = func(id, from PieceID) error {
		if visited[id] {
			return nil
		}
		d, ok := g.pieces[id]
		if !ok {
			return fmt.Errorf("lineage: needed piece %q is not recorded", id)
		}
		visited[id] = true
		if available(d) {
			if from != "" && !fetched[id] {
				fetched[id] = true
				p.Fetch = append(p.Fetch, id)
			}
			return nil
		}
		if s, bad := d.nondeterministic(); bad {
			return fmt.Errorf("lineage: piece %q (step %q): %w", id, s.Stage, ErrNondeterministic)
		}
		for _, par := range d.Parents {
			if err := visit(par, id); err != nil {
				return err
			}
		}
		order = append(order, d)
		return nil
	}
	for _, id := range needed {
		if err := visit(id, ""); err != nil {
			return RebuildPlan{}, err
		}
	}
	if len(order) == 0 {
		return p, nil
	}
	if len(survivors) == 0 {
		return RebuildPlan{}, fmt.Errorf("lineage: %d pieces to rebuild: %w", len(order), ErrNoSurvivors)
	}
	p.Survivors = slices.Clone(survivors)
	p.Tasks = assign(g, order, survivors)
	return p, nil
}

// PlanRerun is the rerun-batch baseline: every piece of g needed by needed
// is re-run from the input (or the nearest materialised piece), whether it
// was lost or not. It is Plan with every worker treated as lost, spread
// over the same survivors, so the two differ only in what they redo.
func PlanRerun(g *Graph, needed []PieceID, survivors []WorkerID) (RebuildPlan, error) {
	// Survivors hold pieces too, but a rerun discards them; plan on a copy
	// of the graph that places every piece on a worker nobody survives as.
	c := NewGraph()
	const nowhere = WorkerID(-1 << 31)
	for _, d := range g.Pieces() {
		d.Worker = nowhere
		if err := c.Add(d); err != nil {
			return RebuildPlan{}, err
		}
	}
	return Plan(c, []WorkerID{nowhere}, needed, survivors)
}

// assign spreads tasks over survivors by load: each task goes to the
// survivor with the least estimated work so far (ties to the earlier
// survivor), taking tasks in dependency order. The estimate of a task is
// the number of input records its chain reads, which is what dominates a
// rebuild of stateless steps. Greedy least-loaded is within a factor of two
// of the best spread and, unlike round-robin, does not pile two large
// pieces onto one worker.
func assign(g *Graph, order []*Derivation, survivors []WorkerID) []Task {
	memo := map[PieceID]int64{}
	var cost func(d *Derivation) int64
	cost = func(d *Derivation) int64 {
		if v, ok := memo[d.ID]; ok {
			return v
		}
		var v int64
		if d.Input != nil {
			v = d.Input.Records()
		} else {
			for _, p := range d.Parents {
				v += cost(g.pieces[p])
			}
		}
		v = max(v, 1) // an empty range still costs an open
		memo[d.ID] = v
		return v
	}
	load := make([]int64, len(survivors))
	tasks := make([]Task, len(order))
	for i, d := range order {
		best := 0
		for w := range load {
			if load[w] < load[best] {
				best = w
			}
		}
		load[best] += cost(d)
		tasks[i] = Task{Piece: d.clone(), Worker: survivors[best]}
	}
	return tasks
}
