package job

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// Params are the knobs of the built-in jobs. Times are milliseconds of event
// time.
type Params struct {
	Window      int64 // windowed-sum: tumbling window size
	JoinWindow  int64 // join: max |orders.ts - payments.ts|
	MaxDisorder int64 // how far event time may go backwards within a partition
}

// DefaultParams are the documented defaults.
var DefaultParams = Params{Window: 1000, JoinWindow: 10000, MaxDisorder: 0}

// Input names of the join job.
const (
	InputOrders   = "orders"
	InputPayments = "payments"
)

var builtins = map[string]struct {
	summary string
	build   func(Params) (*Job, error)
}{
	"keyed-count":  {"drop value<0; per key: count and sum(value)", keyedCount},
	"windowed-sum": {"drop value<0; per key and tumbling event-time window: count and sum", windowedSum},
	"join":         {"orders ⋈ payments on key within a time bound", intervalJoin},
	"etl":          {"stateless: drop value<0, add bucket = key mod 16", etl},
}

// Names lists the built-in jobs, sorted.
func Names() []string {
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Describe returns a one-line description of a built-in job.
func Describe(name string) string { return builtins[name].summary }

// Build returns the built-in job called name.
func Build(name string, p Params) (*Job, error) {
	b, ok := builtins[name]
	if !ok {
		return nil, fmt.Errorf("unknown job %q: allowed are %s", name, strings.Join(Names(), ", "))
	}
	if p.Window <= 0 {
		return nil, fmt.Errorf("window must be positive, got %dms", p.Window)
	}
	if p.JoinWindow < 0 || p.MaxDisorder < 0 {
		return nil, fmt.Errorf("join window and max disorder must not be negative")
	}
	j, err := b.build(p)
	if err != nil {
		return nil, fmt.Errorf("building job %s: %w", name, err)
	}
	j.Name, j.Params = name, p
	if err := j.Validate(); err != nil {
		return nil, err
	}
	return j, nil
}

// stage builds one instance of the operator to learn its output schema, then
// keeps the constructor for per-subtask instances.
func opStage(id string, newOp func() (operator.Operator, error), inputs ...Edge) (*Stage, error) {
	op, err := newOp()
	if err != nil {
		return nil, err
	}
	schema := op.OutputSchema()
	if err := op.Close(); err != nil {
		return nil, err
	}
	return &Stage{ID: id, Kind: OperatorStage, New: newOp, Inputs: inputs, Schema: schema}, nil
}

func sourceStage(id, input string) *Stage {
	return &Stage{ID: id, Kind: SourceStage, Input: input, Schema: source.Schema, Stateless: true}
}

func sinkStage(from *Stage, writeKey ...string) (*Stage, sink.Layout) {
	return &Stage{ID: "sink", Kind: SinkStage, Schema: from.Schema,
			Inputs: []Edge{{From: from.ID, Exchange: Forward}}},
		sink.Layout{Schema: from.Schema, WriteKey: writeKey}
}

func filterStage(in *Stage) (*Stage, error) {
	s, err := opStage("filter", func() (operator.Operator, error) {
		return operator.NewFilterAtLeast(in.Schema, source.ColValue, 0)
	}, Edge{From: in.ID, Exchange: Forward})
	if s != nil {
		s.Stateless = true
	}
	return s, err
}

func keyedStage(id string, newOp func() (operator.Operator, error), from ...*Stage) (*Stage, error) {
	edges := make([]Edge, len(from))
	for i, f := range from {
		edges[i] = Edge{From: f.ID, Port: i, Exchange: Hash, KeyColumn: source.ColKey}
	}
	s, err := opStage(id, newOp, edges...)
	if s != nil {
		s.Keyed = true
	}
	return s, err
}

func keyedCount(p Params) (*Job, error) {
	src := sourceStage("source", DefaultInput)
	filter, err := filterStage(src)
	if err != nil {
		return nil, err
	}
	count, err := keyedStage("count", func() (operator.Operator, error) {
		return operator.NewKeyedAgg(filter.Schema, operator.KeyedAggSpec{KeyColumn: source.ColKey, SumColumn: source.ColValue})
	}, filter)
	if err != nil {
		return nil, err
	}
	snk, layout := sinkStage(count, "key")
	return &Job{Inputs: []string{DefaultInput}, Stages: []*Stage{src, filter, count, snk}, Output: layout}, nil
}

func windowedSum(p Params) (*Job, error) {
	src := sourceStage("source", DefaultInput)
	filter, err := filterStage(src)
	if err != nil {
		return nil, err
	}
	win, err := keyedStage("window", func() (operator.Operator, error) {
		return operator.NewWindowAgg(filter.Schema, operator.WindowSpec{
			KeyColumn: source.ColKey, TimeColumn: source.ColTS, SumColumn: source.ColValue, Size: p.Window})
	}, filter)
	if err != nil {
		return nil, err
	}
	snk, layout := sinkStage(win, "key", "window_start")
	return &Job{Inputs: []string{DefaultInput}, Stages: []*Stage{src, filter, win, snk}, Output: layout, UsesEventTime: true}, nil
}

func intervalJoin(p Params) (*Job, error) {
	orders := sourceStage("orders", InputOrders)
	payments := sourceStage("payments", InputPayments)
	join, err := keyedStage("join", func() (operator.Operator, error) {
		return operator.NewIntervalJoin(orders.Schema, payments.Schema, operator.JoinSpec{
			KeyColumn: source.ColKey, TimeColumn: source.ColTS, IDColumn: source.ColID,
			ValueColumn: source.ColValue, Within: p.JoinWindow})
	}, orders, payments)
	if err != nil {
		return nil, err
	}
	snk, layout := sinkStage(join, "order_id", "payment_id")
	return &Job{Inputs: []string{InputOrders, InputPayments}, Stages: []*Stage{orders, payments, join, snk},
		Output: layout, UsesEventTime: true}, nil
}

func etl(p Params) (*Job, error) {
	src := sourceStage("source", DefaultInput)
	filter, err := filterStage(src)
	if err != nil {
		return nil, err
	}
	project, err := opStage("project", func() (operator.Operator, error) {
		return operator.NewProject(filter.Schema, []operator.NamedExpr{
			{Name: "id", Expr: operator.Col(source.ColID)},
			{Name: "key", Expr: operator.Col(source.ColKey)},
			{Name: "value", Expr: operator.Col(source.ColValue)},
			{Name: "ts", Expr: operator.Col(source.ColTS)},
			{Name: "bucket", Expr: operator.ModConst(source.ColKey, 16)},
			{Name: sink.VersionColumn, Expr: operator.Const(0)},
		})
	}, Edge{From: filter.ID, Exchange: Forward})
	if err != nil {
		return nil, err
	}
	project.Stateless = true
	snk, layout := sinkStage(project, "id")
	return &Job{Inputs: []string{DefaultInput}, Stages: []*Stage{src, filter, project, snk}, Output: layout}, nil
}
