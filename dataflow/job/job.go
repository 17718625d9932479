// Package job is the job model: a job is a DAG of stages, each running one
// operator at some parallelism, connected by exchanges. The same Job value is
// scheduled by every executor; only how it is cut into work and how it
// recovers differ.
package job

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// Exchange says how rows travel from the subtasks of one stage to those of
// the next.
type Exchange int

const (
	// Forward keeps rows on the same subtask index (the stages have the same
	// parallelism); executors may chain forward-connected stages.
	Forward Exchange = iota
	// Hash routes each row to the subtask owning its key group.
	Hash
	// Broadcast sends every row to every subtask.
	Broadcast
)

func (e Exchange) String() string {
	switch e {
	case Forward:
		return "forward"
	case Hash:
		return "hash"
	case Broadcast:
		return "broadcast"
	}
	return fmt.Sprintf("exchange(%d)", int(e))
}

// Kind is what a stage does.
type Kind int

const (
	// SourceStage reads the partitions of one job input.
	SourceStage Kind = iota
	// OperatorStage runs an operator.
	OperatorStage
	// SinkStage hands its input to the job's sink.
	SinkStage
)

// Edge is one input of a stage.
type Edge struct {
	From     string   // upstream stage ID
	Port     int      // input port of this stage's operator
	Exchange Exchange // how rows are routed
	// KeyColumn is the int64 column whose key group decides the route of a
	// Hash exchange.
	KeyColumn string
}

// Stage is one node of the DAG.
type Stage struct {
	ID   string
	Kind Kind
	// Input is the job input a SourceStage reads.
	Input string
	// New builds a fresh operator instance for one subtask (OperatorStage).
	New func() (operator.Operator, error)
	// Inputs are the upstream edges, in port order.
	Inputs []Edge
	// Keyed stages receive rows by key group and hold keyed state.
	Keyed bool
	// Stateless stages keep nothing between batches, so a lost piece of
	// their output can be rebuilt from its derivation (package lineage).
	Stateless bool
	// Schema is the schema of the rows the stage emits.
	Schema *arrow.Schema
}

// Job is a named, validated DAG.
type Job struct {
	Name string
	// Inputs are the names of the job's inputs, in order. Single-input jobs
	// use DefaultInput.
	Inputs []string
	// Stages in topological order: every edge points to an earlier stage.
	Stages []*Stage
	// Output describes the rows the sink stage receives.
	Output sink.Layout
	// Params are the values the job was built with.
	Params Params
	// UsesEventTime is true for jobs whose operators need watermarks.
	UsesEventTime bool
}

// DefaultInput is the input name of single-input jobs.
const DefaultInput = "in"

// Stage returns the stage with id, or nil.
func (j *Job) Stage(id string) *Stage {
	for _, s := range j.Stages {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Consumers returns the stages that read from stage id, with the edge.
func (j *Job) Consumers(id string) []Consumer {
	var out []Consumer
	for _, s := range j.Stages {
		for _, e := range s.Inputs {
			if e.From == id {
				out = append(out, Consumer{Stage: s, Edge: e})
			}
		}
	}
	return out
}

// Consumer is a downstream stage and the edge that feeds it.
type Consumer struct {
	Stage *Stage
	Edge  Edge
}

// Validate checks the structural rules every executor relies on.
func (j *Job) Validate() error {
	seen := map[string]bool{}
	sinks := 0
	for _, s := range j.Stages {
		if seen[s.ID] {
			return fmt.Errorf("job %s: duplicate stage %q", j.Name, s.ID)
		}
		for _, e := range s.Inputs {
			if !seen[e.From] {
				return fmt.Errorf("job %s: stage %q reads %q, which is not an earlier stage", j.Name, s.ID, e.From)
			}
			if e.Exchange == Hash && e.KeyColumn == "" {
				return fmt.Errorf("job %s: hash edge %s->%s has no key column", j.Name, e.From, s.ID)
			}
		}
		switch s.Kind {
		case SourceStage:
			if len(s.Inputs) != 0 || s.Input == "" {
				return fmt.Errorf("job %s: source stage %q must name an input and have no edges", j.Name, s.ID)
			}
		case OperatorStage:
			if s.New == nil || len(s.Inputs) == 0 {
				return fmt.Errorf("job %s: operator stage %q needs an operator and an input edge", j.Name, s.ID)
			}
		case SinkStage:
			sinks++
			if len(s.Inputs) != 1 {
				return fmt.Errorf("job %s: sink stage %q needs exactly one input", j.Name, s.ID)
			}
		}
		seen[s.ID] = true
	}
	if sinks != 1 {
		return fmt.Errorf("job %s: want exactly one sink stage, have %d", j.Name, sinks)
	}
	return nil
}

// OpenChain builds and opens fresh operator instances of stages, in order,
// each emitting into the next, all with octx. The caller links the sink and
// closes the chain; on an error the chain is closed and the error names the
// stage.
func OpenChain(stages []*Stage, octx operator.Context) (*operator.Chain, error) {
	ch := &operator.Chain{}
	for _, st := range stages {
		if err := ch.New(st.New, octx, 0); err != nil {
			_ = ch.Close()
			return nil, fmt.Errorf("stage %s: %w", st.ID, err)
		}
	}
	return ch, nil
}
