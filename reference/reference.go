// Package reference is the reference executor (--executor reference): the
// oracle's evaluation (package oracle) writing through the configured sink
// in a single epoch, on one worker, with no durable storage and no
// failures. Every other executor's result is checked against its output.
package reference

import (
	"context"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// Executor is the reference executor.
type Executor struct{}

// Name implements run.Executor.
func (Executor) Name() string { return "reference" }

// Traits implements run.Executor: the failure-free oracle, with no
// settings of its own.
func (Executor) Traits() run.Traits { return run.Traits{Reference: true} }

// FailPoints implements run.Executor: the reference never fails.
func (Executor) FailPoints() []string { return nil }

// Workers implements run.Executor.
func (Executor) Workers(run.Config) int { return 1 }

// Run implements run.Executor.
func (Executor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	start := time.Now()
	w, err := env.Sink.Writer(0, 0)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	const epoch = 1
	var rowsOut int64
	res, err := oracle.Stream(ctx, env.Job, env.Sources, env.Alloc, func(b arrow.RecordBatch) error {
		rowsOut += b.NumRows()
		return w.Write(epoch, b)
	})
	if err != nil {
		return nil, err
	}
	if err := w.Flush(epoch); err != nil {
		return nil, err
	}
	if err := env.Sink.Commit(epoch); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	return &report.Summary{
		RecordsIn:     res.RecordsIn,
		RowsOut:       rowsOut,
		LateRows:      res.LateRows,
		WallMs:        report.Millis(wall),
		ThroughputRPS: report.Rate(res.RecordsIn, wall),
	}, nil
}
