// Package oracle is the reference evaluator every crash test compares with:
// one thread, no failures, a bounded input, and no watermark until the input
// is exhausted.
//
// Holding event time back until the end makes the oracle's answer the
// relational one: every window sees all its rows and the join sees every
// pair, whatever order the partitions are read in. Executors reach the same
// answer when the input's disorder stays within --max-disorder (no late
// rows); when it does not, they drop and count late rows and the oracle shows
// what the complete answer would have been.
package oracle

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// ReadBatchRows is how many rows the oracle asks a source for at a time.
const ReadBatchRows = 64 * 1024

// Result is what Evaluate computed.
type Result struct {
	// Rows are the rows handed to the sink, in the sink's column order.
	Columns []string
	Rows    [][]int64
	// Table is Rows resolved by write key.
	Table     *sink.Table
	RecordsIn int64
	LateRows  int64
}

// Evaluate runs j over sources and returns the rows its sink stage receives.
// Every source must be bounded.
func Evaluate(ctx context.Context, j *job.Job, sources map[string]source.Source, alloc memory.Allocator) (*Result, error) {
	res := &Result{Columns: sink.ColumnNames(j.Output.Schema)}
	err := evaluate(ctx, j, sources, alloc, res, func(b arrow.RecordBatch) error {
		var err error
		res.Rows, err = sink.RowsOf(b, res.Columns, res.Rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	table, _, err := sink.ResolveRows(j.Output, res.Columns, res.Rows)
	if err != nil {
		return nil, err
	}
	res.Table = table
	return res, nil
}

// Stream evaluates j over sources like Evaluate, but hands the sink
// stage's input batches (borrowed) to toSink instead of keeping them: the
// reference executor writes them through its sink. The Result holds the
// counts only.
func Stream(ctx context.Context, j *job.Job, sources map[string]source.Source, alloc memory.Allocator,
	toSink func(arrow.RecordBatch) error) (*Result, error) {
	res := &Result{}
	if err := evaluate(ctx, j, sources, alloc, res, toSink); err != nil {
		return nil, err
	}
	return res, nil
}

// evaluate walks the stages in topological order, materialising each
// stage's output before the next runs. toSink receives the sink stage's
// input batches (borrowed).
func evaluate(ctx context.Context, j *job.Job, sources map[string]source.Source, alloc memory.Allocator,
	res *Result, toSink func(arrow.RecordBatch) error) error {
	outputs := map[string][]arrow.RecordBatch{}
	pending := map[string]int{} // consumers left per stage, to free outputs early
	for _, s := range j.Stages {
		pending[s.ID] = len(j.Consumers(s.ID))
	}
	defer func() {
		for _, bs := range outputs {
			releaseAll(bs)
		}
	}()
	done := func(id string) {
		if pending[id]--; pending[id] == 0 {
			releaseAll(outputs[id])
			delete(outputs, id)
		}
	}
	for _, st := range j.Stages {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch st.Kind {
		case job.SourceStage:
			src, ok := sources[st.Input]
			if !ok {
				return fmt.Errorf("job %s needs input %q, which was not given", j.Name, st.Input)
			}
			if !src.Bounded() {
				return run.InputError{Input: st.Input, Err: fmt.Errorf(
					"the reference executor needs a bounded input, and %s is endless (give it records=N)", src.Spec())}
			}
			bs, n, err := readAll(ctx, src, alloc)
			if err != nil {
				return fmt.Errorf("reading input %s: %w", st.Input, err)
			}
			res.RecordsIn += n
			outputs[st.ID] = bs
		case job.OperatorStage:
			bs, late, err := runOperator(st, outputs, alloc)
			if err != nil {
				return fmt.Errorf("stage %s: %w", st.ID, err)
			}
			res.LateRows += late
			outputs[st.ID] = bs
			for _, e := range st.Inputs {
				done(e.From)
			}
		case job.SinkStage:
			for _, b := range outputs[st.Inputs[0].From] {
				if err := toSink(b); err != nil {
					return err
				}
			}
			done(st.Inputs[0].From)
		}
	}
	return nil
}

func readAll(ctx context.Context, src source.Source, alloc memory.Allocator) ([]arrow.RecordBatch, int64, error) {
	var out []arrow.RecordBatch
	var n int64
	for i, name := range src.Partitions() {
		r, err := src.Open(ctx, i, source.Position{Partition: name}, alloc)
		if err != nil {
			releaseAll(out)
			return nil, 0, err
		}
		for {
			b, _, err := r.Next(ctx, ReadBatchRows)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				r.Close()
				releaseAll(out)
				return nil, 0, err
			}
			n += b.NumRows()
			out = append(out, b)
		}
		if err := r.Close(); err != nil {
			releaseAll(out)
			return nil, 0, err
		}
	}
	return out, n, nil
}

func runOperator(st *job.Stage, outputs map[string][]arrow.RecordBatch, alloc memory.Allocator) (out []arrow.RecordBatch, late int64, err error) {
	op, err := st.New()
	if err != nil {
		return nil, 0, err
	}
	var ch operator.Chain
	defer func() {
		if cerr := ch.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if err != nil {
			releaseAll(out)
			out = nil
		}
	}()
	if err := ch.Open(op, operator.Context{Alloc: alloc, Subtask: 0, Parallelism: 1, KeyGroups: keygroup.All}, 0); err != nil {
		return nil, 0, err
	}
	ch.Link(operator.EmitFunc(func(b arrow.RecordBatch) error {
		b.Retain()
		out = append(out, b)
		return nil
	}))
	for _, e := range st.Inputs {
		for _, b := range outputs[e.From] {
			if err := ch.Process(e.Port, b); err != nil {
				return out, 0, err
			}
		}
	}
	if err := ch.Flush(); err != nil {
		return out, 0, err
	}
	if err := ch.AdvanceWatermark(operator.EndOfTime); err != nil {
		return out, 0, err
	}
	if lc, ok := op.(operator.LateCounter); ok {
		late = lc.LateRows()
	}
	return out, late, nil
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}
