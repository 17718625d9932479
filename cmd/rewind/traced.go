package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/spacetime/diagram"
)

// traced is one run of trace or of a lesson: what it ran, its summary,
// its diagram and progress events, and its resolved result.
type traced struct {
	cfg      run.Config
	exec     run.Executor
	summary  *report.Summary
	rec      diagram.Recording
	timeline *report.Timeline
	result   *sink.Table
	// steps are what the run's mistake logged (none without one).
	steps []mistake.Step
	// start is the moment the diagram's times count from.
	start time.Time
}

// runTraced runs cfg on exec, making plan's mistake (nil: none),
// recording the time-space diagram and the progress events, and resolves
// its output. The reference runs without storage and records nothing.
func runTraced(ctx context.Context, exec run.Executor, cfg run.Config, plan *mistake.Plan, log *slog.Logger) (*traced, error) {
	ref := exec.Traits().Reference
	var tl *report.Timeline
	if !ref {
		tl = report.NewTimeline()
		cfg.Progress = tl
	}
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), log, !ref, run.OutputOverwrite)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	env.Mistake = plan
	start := time.Now()
	if !ref {
		// The diagram's time counts from here, just before the executor
		// starts.
		env.Trace = spacetime.NewRecorder(start)
	}
	s, err := run.Execute(ctx, exec, env)
	if err != nil {
		return nil, err
	}
	if s.Interrupted {
		// A partial output compared with the reference would read as a
		// wrong result.
		return nil, errInterrupted
	}
	res, _, err := sink.Resolve(cfg.Output, env.Job.Output)
	if err != nil {
		return nil, err
	}
	t := &traced{cfg: cfg, exec: exec, summary: s, timeline: tl, result: res, steps: plan.Steps(), start: start}
	if !ref {
		t.rec = diagram.FromRecorder(env.Trace)
	}
	return t, nil
}

// traceLogger logs errors only, or the executor's details with -v.
func traceLogger(verbose bool, stderr io.Writer) *slog.Logger {
	level := slog.LevelError
	if verbose {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}
