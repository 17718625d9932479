package recordwise

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// A chain is a run of stages executed by one task per subtask: a head (a
// source, or an operator fed by network channels) followed by the stages
// forward-connected to it, possibly ending in the sink. Records move
// between the stages of a chain by function call; between chains they
// travel through channels.
type chain struct {
	name   string     // head stage id; tasks are "<name>-<subtask>"
	index  int        // position in plan.chains
	source *job.Stage // the source stage, for source chains
	ops    []*job.Stage
	sink   bool // the chain ends in the sink stage
	// inputs are the network edges feeding the head operator, in port
	// order of the head's job edges.
	inputs []*chainInput
	// outputs are the network edges leaving the chain's last stage.
	outputs []*chainOutput
	// schema of the rows the chain's last stage emits.
	schema *arrow.Schema
	last   string // id of the chain's last stage
}

type chainInput struct {
	from     *chain
	port     int
	exchange job.Exchange
	// first is the index of this edge's first channel among the task's
	// input channels; a forward edge has one channel, the others one per
	// upstream subtask.
	first int
}

// channels is the number of input channels this edge gives a task.
func (in *chainInput) channels(p int) int {
	if in.exchange == job.Forward {
		return 1
	}
	return p
}

type chainOutput struct {
	to       *chain
	input    *chainInput // the edge as the consumer sees it
	exchange job.Exchange
	keyCol   int // column of the hash key in the chain's output schema
}

// plan is the task graph of one job at one parallelism. It is derived from
// the job alone, so it is the same in every incarnation and channel
// indexes saved in a recovery point stay meaningful.
type plan struct {
	job         *job.Job
	parallelism int
	chains      []*chain
}

func buildPlan(j *job.Job, p int) (*plan, error) {
	if p < 1 {
		return nil, fmt.Errorf("parallelism must be at least 1, got %d", p)
	}
	pl := &plan{job: j, parallelism: p}
	of := map[string]*chain{}
	for _, s := range j.Stages {
		if !validName(s.ID) {
			return nil, fmt.Errorf("stage id %q cannot be used in object names", s.ID)
		}
		if s.Kind == job.SourceStage {
			c := &chain{name: s.ID, source: s, schema: source.Schema, last: s.ID}
			pl.add(c)
			of[s.ID] = c
			continue
		}
		if len(s.Inputs) == 1 && s.Inputs[0].Exchange == job.Forward && len(j.Consumers(s.Inputs[0].From)) == 1 {
			up := of[s.Inputs[0].From]
			if up != nil && up.last == s.Inputs[0].From && !up.sink {
				up.appendStage(s)
				of[s.ID] = up
				continue
			}
		}
		c := &chain{name: s.ID}
		pl.add(c)
		c.appendStage(s)
		of[s.ID] = c
		for _, e := range s.Inputs {
			from := of[e.From]
			if from == nil || from.last != e.From {
				return nil, fmt.Errorf("stage %s reads %s, which is inside a chain", s.ID, e.From)
			}
			c.inputs = append(c.inputs, &chainInput{from: from, port: e.Port, exchange: e.Exchange})
		}
	}
	for _, c := range pl.chains {
		n := 0
		for _, in := range c.inputs {
			in.first = n
			n += in.channels(p)
		}
		if c.source == nil && len(c.inputs) == 0 {
			return nil, fmt.Errorf("chain %s has neither a source nor inputs", c.name)
		}
	}
	// Outputs: the consumers of each chain's last stage in other chains.
	for _, c := range pl.chains {
		for _, cons := range j.Consumers(c.last) {
			to := of[cons.Stage.ID]
			if to == c {
				continue
			}
			var in *chainInput
			for _, ci := range to.inputs {
				if ci.from == c && ci.port == cons.Edge.Port {
					in = ci
				}
			}
			if in == nil {
				return nil, fmt.Errorf("edge %s->%s not found", c.last, cons.Stage.ID)
			}
			o := &chainOutput{to: to, input: in, exchange: cons.Edge.Exchange, keyCol: -1}
			if o.exchange == job.Hash {
				idx := c.schema.FieldIndices(cons.Edge.KeyColumn)
				if len(idx) != 1 {
					return nil, fmt.Errorf("hash edge %s->%s: key column %q not in %s", c.last, cons.Stage.ID, cons.Edge.KeyColumn, c.schema)
				}
				o.keyCol = idx[0]
			}
			for i, f := range c.schema.Fields() {
				if f.Type.ID() != arrow.INT64 {
					return nil, fmt.Errorf("edge %s->%s: column %d (%s) is %s: recordwise channels carry int64 columns only", c.last, cons.Stage.ID, i, f.Name, f.Type)
				}
			}
			c.outputs = append(c.outputs, o)
		}
		if len(c.outputs) == 0 && !c.sink {
			return nil, fmt.Errorf("chain %s leads nowhere", c.name)
		}
	}
	return pl, nil
}

func (pl *plan) add(c *chain) {
	c.index = len(pl.chains)
	pl.chains = append(pl.chains, c)
}

func (c *chain) appendStage(s *job.Stage) {
	switch s.Kind {
	case job.SinkStage:
		c.sink = true
	default:
		c.ops = append(c.ops, s)
		c.schema = s.Schema
	}
	c.last = s.ID
}

// inputChannels is the number of input channels of each task of c.
func (c *chain) inputChannels(p int) int {
	n := 0
	for _, in := range c.inputs {
		n += in.channels(p)
	}
	return n
}

// channelPort returns the operator port and upstream subtask of input
// channel ch of subtask sub.
func (c *chain) channelPort(ch, sub, p int) (port int, from int) {
	for _, in := range c.inputs {
		if ch < in.first+in.channels(p) {
			if in.exchange == job.Forward {
				return in.port, sub
			}
			return in.port, ch - in.first
		}
	}
	panic(fmt.Sprintf("recordwise: channel %d out of range", ch))
}
