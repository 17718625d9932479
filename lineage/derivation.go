package lineage

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// PieceID names one piece of an intermediate dataset. Executors choose the
// names (for example "b7/filter/p3/0"); lineage only needs them unique
// within a Graph.
type PieceID string

// WorkerID names a worker: the process whose memory holds a piece.
type WorkerID int

// InputRange is the part of one job input a source-derived piece was read
// from: partition Partition (an index into Source.Partitions()) from
// recorded read position Start up to, but not including, offset End.
// Start carries the partition's stable name, so a derivation recorded
// against one partition can never be replayed against another.
type InputRange struct {
	Input     string `json:"input"`
	Partition int    `json:"partition"`
	// Start is where the piece's first record was read from.
	Start source.Position `json:"start"`
	// End is the offset just after the piece's last record.
	End int64 `json:"end"`
}

// Records is how many input records the range covers.
func (r InputRange) Records() int64 { return r.End - r.Start.Offset }

// Step is one step of a derivation: a job stage whose operator is applied
// to the piece's input, in order.
type Step struct {
	Stage string `json:"stage"`
	// Deterministic says that the step's output is a function of its input
	// rows and their order alone. Only such steps may be re-run: a rebuilt
	// piece must equal the lost one byte for byte, or two parts of the same
	// result would be derived from different data.
	Deterministic bool `json:"deterministic"`
}

// Derivation is the recorded derivation of one stateless piece: where its
// rows came from, which steps produced them, and where the piece lives
// now. It is a plain value and round-trips through JSON so executors can
// keep it next to the piece's metadata.
//
// Exactly one of Input and Parents is set. A piece with parents is derived
// by running Steps over the rows of its parents, concatenated in the order
// the parents are listed (all into port 0: every stateless step has one
// input).
type Derivation struct {
	ID      PieceID     `json:"id"`
	Input   *InputRange `json:"input,omitempty"`
	Parents []PieceID   `json:"parents,omitempty"`
	Steps   []Step      `json:"steps"`
	// Worker is the worker whose memory holds the piece.
	Worker WorkerID `json:"worker"`
	// Materialised is set once a copy of the piece sits in durable shared
	// storage (a materialised file, a committed batch). Such a piece survives
	// the loss of its worker and cuts every chain that passes through it,
	// which is what bounds lineage depth (the role of RDD checkpointing).
	Materialised bool `json:"materialised,omitempty"`
}

// ErrNondeterministic is wrapped by the error Plan and Rebuild return for a
// piece whose steps include one that is not deterministic.
var ErrNondeterministic = errors.New("step is not deterministic, so a lost piece cannot be rebuilt from its derivation")

// ErrNoSurvivors is wrapped by the error Plan returns when pieces must be
// rebuilt and no worker survives to rebuild them.
var ErrNoSurvivors = errors.New("no surviving worker to rebuild on")

// nondeterministic returns the first step of d that is not deterministic.
func (d Derivation) nondeterministic() (Step, bool) {
	for _, s := range d.Steps {
		if !s.Deterministic {
			return s, true
		}
	}
	return Step{}, false
}

// Determinism may be implemented by an operator to declare whether its
// output depends on anything but its input rows (a random draw, a clock,
// a lookup that can change). StepsFor records what it says; an operator
// that does not implement it is taken to be deterministic, which holds for
// every stateless operator of the shared set: filter and project compute
// each output row from one input row and never read a clock (operators are
// handed time by the executor, see package operator).
type Determinism interface {
	Deterministic() bool
}

// StepsFor returns the steps for the given stages of j, in the order given,
// with their Deterministic flags. Every stage must be a Stateless operator
// stage with one input: a stage that keeps state between batches has no
// piece-local derivation, and lineage must not pretend it does.
func StepsFor(j *job.Job, stageIDs ...string) ([]Step, error) {
	steps := make([]Step, 0, len(stageIDs))
	for _, id := range stageIDs {
		st, err := stepStage(j, id)
		if err != nil {
			return nil, err
		}
		det, err := stageDeterministic(st)
		if err != nil {
			return nil, err
		}
		steps = append(steps, Step{Stage: id, Deterministic: det})
	}
	return steps, nil
}

// stepStage looks a step's stage up and checks that lineage may run it.
func stepStage(j *job.Job, id string) (*job.Stage, error) {
	st := j.Stage(id)
	switch {
	case st == nil:
		return nil, fmt.Errorf("job %s has no stage %q", j.Name, id)
	case st.Kind != job.OperatorStage:
		return nil, fmt.Errorf("stage %q of job %s is not an operator stage, so it cannot be a lineage step", id, j.Name)
	case !st.Stateless:
		return nil, fmt.Errorf("stage %q of job %s keeps state between batches, so its pieces have no lineage", id, j.Name)
	case len(st.Inputs) != 1:
		return nil, fmt.Errorf("stage %q of job %s has %d inputs; a lineage step has exactly one", id, j.Name, len(st.Inputs))
	}
	return st, nil
}

// stageDeterministic builds one throwaway instance of the stage's operator
// to ask it (see Determinism).
func stageDeterministic(st *job.Stage) (bool, error) {
	op, err := st.New()
	if err != nil {
		return false, fmt.Errorf("stage %s: %w", st.ID, err)
	}
	det := operatorDeterministic(op)
	if err := op.Close(); err != nil {
		return false, fmt.Errorf("stage %s: %w", st.ID, err)
	}
	return det, nil
}

func operatorDeterministic(op operator.Operator) bool {
	if d, ok := op.(Determinism); ok {
		return d.Deterministic()
	}
	return true
}

// Graph holds the derivations of the pieces of one run (or one batch).
// Parents must be added before their children, so a Graph is acyclic by
// construction and its insertion order is a dependency order.
type Graph struct {
	pieces map[PieceID]*Derivation
	order  []PieceID
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{pieces: map[PieceID]*Derivation{}} }

// Add records d. It fails when the id is taken, when a parent is unknown,
// or when d is neither source-derived nor parent-derived.
func (g *Graph) Add(d Derivation) error {
	if d.ID == "" {
		return errors.New("lineage: piece without an id")
	}
	if _, ok := g.pieces[d.ID]; ok {
		return fmt.Errorf("lineage: piece %q recorded twice", d.ID)
	}
	switch {
	case d.Input != nil && len(d.Parents) > 0:
		return fmt.Errorf("lineage: piece %q names both an input range and parents", d.ID)
	case d.Input == nil && len(d.Parents) == 0:
		return fmt.Errorf("lineage: piece %q names neither an input range nor parents", d.ID)
	case d.Input != nil && (d.Input.End < d.Input.Start.Offset || d.Input.Start.Offset < 0):
		return fmt.Errorf("lineage: piece %q has input range [%d, %d)", d.ID, d.Input.Start.Offset, d.Input.End)
	}
	for _, p := range d.Parents {
		if _, ok := g.pieces[p]; !ok {
			return fmt.Errorf("lineage: piece %q names parent %q, which is not recorded (parents first)", d.ID, p)
		}
	}
	c := d
	c.Parents = append([]PieceID(nil), d.Parents...)
	c.Steps = append([]Step(nil), d.Steps...)
	if d.Input != nil {
		in := *d.Input
		c.Input = &in
	}
	g.pieces[d.ID] = &c
	g.order = append(g.order, d.ID)
	return nil
}

// Piece returns a copy of the derivation of id.
func (g *Graph) Piece(id PieceID) (Derivation, bool) {
	d, ok := g.pieces[id]
	if !ok {
		return Derivation{}, false
	}
	return d.clone(), true
}

func (d *Derivation) clone() Derivation {
	c := *d
	c.Parents = append([]PieceID(nil), d.Parents...)
	c.Steps = append([]Step(nil), d.Steps...)
	if d.Input != nil {
		in := *d.Input
		c.Input = &in
	}
	return c
}

// Len is the number of recorded pieces.
func (g *Graph) Len() int { return len(g.order) }

// Pieces returns every derivation in insertion (dependency) order.
func (g *Graph) Pieces() []Derivation {
	out := make([]Derivation, len(g.order))
	for i, id := range g.order {
		out[i] = g.pieces[id].clone()
	}
	return out
}

// Materialise records that a durable copy of id exists, cutting the chain.
func (g *Graph) Materialise(id PieceID) error {
	d, ok := g.pieces[id]
	if !ok {
		return fmt.Errorf("lineage: no piece %q", id)
	}
	d.Materialised = true
	return nil
}

// Move records that id now lives on worker w (after a rebuild).
func (g *Graph) Move(id PieceID, w WorkerID) error {
	d, ok := g.pieces[id]
	if !ok {
		return fmt.Errorf("lineage: no piece %q", id)
	}
	d.Worker = w
	return nil
}

// Depth is the length of the longest chain of derivations a rebuild of id
// could have to walk: 0 for a materialised piece, 1 for a piece read from
// the input, 1 + the deepest parent otherwise. Executors materialise a
// piece when its depth would exceed their bound (see MaxDepth), so the
// cost of a rebuild stays bounded however long the job runs.
func (g *Graph) Depth(id PieceID) int {
	memo := map[PieceID]int{}
	var depth func(PieceID) int
	depth = func(id PieceID) int {
		if v, ok := memo[id]; ok {
			return v
		}
		d := g.pieces[id]
		v := 0
		switch {
		case d == nil || d.Materialised:
		case d.Input != nil:
			v = 1
		default:
			for _, p := range d.Parents {
				v = max(v, depth(p))
			}
			v++
		}
		memo[id] = v
		return v
	}
	return depth(id)
}

// MaxDepth is the default bound on lineage depth: a piece deeper than this
// should be materialised. A short bound keeps a rebuild to a few steps;
// the stateless part of every built-in job is at most two steps deep.
const MaxDepth = 8

// MarshalJSON encodes the graph as the list of derivations in insertion
// order.
func (g *Graph) MarshalJSON() ([]byte, error) { return json.Marshal(g.Pieces()) }

// UnmarshalJSON decodes what MarshalJSON wrote, re-checking every rule of
// Add, so a stored graph cannot smuggle in a cycle or a dangling parent.
func (g *Graph) UnmarshalJSON(b []byte) error {
	var ds []Derivation
	if err := json.Unmarshal(b, &ds); err != nil {
		return err
	}
	ng := NewGraph()
	for _, d := range ds {
		if err := ng.Add(d); err != nil {
			return err
		}
	}
	*g = *ng
	return nil
}
