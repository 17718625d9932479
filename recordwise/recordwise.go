package recordwise

import (
	"context"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// Executor is the recordwise executor. Until issue #4 lands it refuses to run
// rather than pretend: the CLI reports that it is not implemented yet.
type Executor struct{}

// Name implements run.Executor.
func (Executor) Name() string { return "recordwise" }

// FailPoints implements run.Executor.
func (Executor) FailPoints() []string { return nil }

// Workers implements run.Executor.
func (Executor) Workers(cfg run.Config) int { return cfg.Parallelism }

// Run implements run.Executor.
func (Executor) Run(context.Context, *run.Env) (*run.Summary, error) {
	return nil, run.ErrNotImplemented{Executor: "recordwise", Issue: "issue #4"}
}
