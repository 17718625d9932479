package diskphase

import (
	"context"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// Executor is the diskphase executor. Until issue #5 lands it refuses to run
// rather than pretend: the CLI reports that it is not implemented yet.
type Executor struct{}

// Name implements run.Executor.
func (Executor) Name() string { return "diskphase" }

// FailPoints implements run.Executor.
func (Executor) FailPoints() []string { return nil }

// Workers implements run.Executor.
func (Executor) Workers(cfg run.Config) int { return cfg.Parallelism }

// Run implements run.Executor.
func (Executor) Run(context.Context, *run.Env) (*run.Summary, error) {
	return nil, run.ErrNotImplemented{Executor: "diskphase", Issue: "issue #5"}
}
