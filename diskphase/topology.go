package diskphase

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// topology is a job cut into the two phases: per input, the chain of
// stateless steps a map unit applies (ending at the hash exchange, or at
// the sink for map-only jobs), then the keyed stage a reduce unit runs and
// the stateless steps between it and the sink.
//
// The shapes this covers are those of MapReduce: sources, forward chains of
// stateless operators, at most one hash exchange into one keyed stage
// (with one port per input), forward stateless operators to the sink. Every
// built-in job has that shape; anything else is refused with the reason.
type topology struct {
	job    *job.Job
	inputs []inputChain
	// reduce is the keyed stage, nil for map-only jobs.
	reduce   *job.Stage
	stateful bool
	post     []*job.Stage
	out      *arrow.Schema
	outNames []string
}

type inputChain struct {
	name   string
	chain  []*job.Stage
	schema *arrow.Schema // rows at the end of the chain
	names  []string
	keyIdx int // hash key column in schema (-1 for map-only)
	port   int
}

// split is one partition of one input: the input split of a map unit.
type split struct {
	input     int // index into topology.inputs
	partition int
	name      string
}

func compile(j *job.Job) (*topology, error) {
	t := &topology{job: j, out: j.Output.Schema}
	refuse := func(format string, args ...any) (*topology, error) {
		return nil, fmt.Errorf("diskphase cannot run job %s: %s (it runs sources, forward chains of stateless steps, one hash exchange into one keyed stage, and forward stateless steps to the sink)",
			j.Name, fmt.Sprintf(format, args...))
	}
	for _, in := range j.Inputs {
		var src *job.Stage
		for _, s := range j.Stages {
			if s.Kind == job.SourceStage && s.Input == in {
				if src != nil {
					return refuse("input %q is read by two source stages", in)
				}
				src = s
			}
		}
		if src == nil {
			return refuse("no source stage reads input %q", in)
		}
		ic := inputChain{name: in, keyIdx: -1}
		cur := src
		for {
			cons := j.Consumers(cur.ID)
			if len(cons) != 1 {
				return refuse("stage %q feeds %d stages, want exactly 1", cur.ID, len(cons))
			}
			st, e := cons[0].Stage, cons[0].Edge
			if st.Kind == job.SinkStage {
				if e.Exchange != job.Forward {
					return refuse("the sink is fed through a %s exchange", e.Exchange)
				}
				break
			}
			if e.Exchange == job.Hash {
				if t.reduce != nil && t.reduce != st {
					return refuse("two keyed stages (%q and %q)", t.reduce.ID, st.ID)
				}
				t.reduce = st
				ic.port = e.Port
				idx := cur.Schema.FieldIndices(e.KeyColumn)
				if len(idx) != 1 || cur.Schema.Field(idx[0]).Type.ID() != arrow.INT64 {
					return refuse("hash key %q is not an int64 column of stage %q", e.KeyColumn, cur.ID)
				}
				ic.keyIdx = idx[0]
				break
			}
			if e.Exchange != job.Forward || st.Kind != job.OperatorStage || len(st.Inputs) != 1 || !st.Stateless {
				return refuse("stage %q (%s edge from %q) is not a stateless forward step", st.ID, e.Exchange, cur.ID)
			}
			ic.chain = append(ic.chain, st)
			cur = st
		}
		ic.schema = cur.Schema
		ic.names = fieldNames(cur.Schema)
		t.inputs = append(t.inputs, ic)
	}
	mapOnly := 0
	for _, ic := range t.inputs {
		if ic.keyIdx < 0 {
			mapOnly++
		}
	}
	switch {
	case mapOnly > 0 && mapOnly != len(t.inputs):
		return refuse("some inputs reach the sink without the keyed stage")
	case mapOnly > 1:
		return refuse("several inputs reach the sink directly")
	case t.reduce != nil:
		if len(t.reduce.Inputs) != len(t.inputs) {
			return refuse("keyed stage %q has %d inputs, the job %d", t.reduce.ID, len(t.reduce.Inputs), len(t.inputs))
		}
		seen := map[int]bool{}
		for _, ic := range t.inputs {
			if seen[ic.port] {
				return refuse("two inputs feed port %d of %q", ic.port, t.reduce.ID)
			}
			seen[ic.port] = true
		}
		probe, err := t.reduce.New()
		if err != nil {
			return nil, err
		}
		_, t.stateful = probe.(operator.Stateful)
		if err := probe.Close(); err != nil {
			return nil, err
		}
		cur := t.reduce
		for {
			cons := j.Consumers(cur.ID)
			if len(cons) != 1 {
				return refuse("stage %q feeds %d stages, want exactly 1", cur.ID, len(cons))
			}
			st, e := cons[0].Stage, cons[0].Edge
			if e.Exchange != job.Forward {
				return refuse("stage %q is fed through a %s exchange after the keyed stage", st.ID, e.Exchange)
			}
			if st.Kind == job.SinkStage {
				break
			}
			if st.Kind != job.OperatorStage || len(st.Inputs) != 1 || !st.Stateless {
				return refuse("stage %q after the keyed stage is not a stateless forward step", st.ID)
			}
			t.post = append(t.post, st)
			cur = st
		}
	}
	for _, ic := range t.inputs {
		if err := allInt64(ic.schema); err != nil {
			return refuse("rows of input %q before the exchange: %v", ic.name, err)
		}
	}
	if err := allInt64(t.out); err != nil {
		return refuse("output rows: %v", err)
	}
	t.outNames = fieldNames(t.out)
	return t, nil
}

func (t *topology) mapOnly() bool { return t.reduce == nil }

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}

func allInt64(s *arrow.Schema) error {
	for _, f := range s.Fields() {
		if f.Type.ID() != arrow.INT64 {
			return fmt.Errorf("column %q is %s; materialised tables hold int64 columns", f.Name, f.Type)
		}
	}
	return checkNames(fieldNames(s))
}

// splitsOf lists the input splits: every partition of every input, inputs
// in job order.
func (t *topology) splitsOf(sources map[string]source.Source) ([]split, error) {
	var out []split
	for i, ic := range t.inputs {
		src, ok := sources[ic.name]
		if !ok {
			return nil, fmt.Errorf("job %s needs input %q, which was not given", t.job.Name, ic.name)
		}
		for p, name := range src.Partitions() {
			out = append(out, split{input: i, partition: p, name: name})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the inputs of job %s have no partitions", t.job.Name)
	}
	return out, nil
}

// stateNames are the columns of a state table: the key group, then the
// operator's state columns.
const kgColumn = "_kg"

func stateNames(op operator.Stateful) ([]string, error) {
	s := op.StateSchema()
	if err := allInt64(s); err != nil {
		return nil, err
	}
	names := append([]string{kgColumn}, fieldNames(s)...)
	if err := checkNames(names); err != nil {
		return nil, err
	}
	return names, nil
}
