package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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
	// beforeRestore are the visible files of the output when the run
	// reported its first recovery (the restore done, the replay not yet
	// begun): what the run had published before it. nil without one.
	beforeRestore []string
}

// restoreTap lists the output's visible files at the first "recovery"
// progress event. An executor that restores emits it once the restore is
// done and before the replay writes anything, so the listing is what the
// run published before the restore; one that emits none leaves the list
// nil.
type restoreTap struct {
	dir   string
	seen  bool
	files []string
	err   error
}

func (r *restoreTap) Write(p []byte) (int, error) {
	if r.seen {
		return len(p), nil
	}
	var ev struct {
		Event string `json:"event"`
	}
	if json.Unmarshal(p, &ev) != nil || ev.Event != "recovery" {
		return len(p), nil
	}
	r.seen = true
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		r.err = err
		return len(p), nil
	}
	r.files = []string{}
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "_") && !strings.HasPrefix(n, ".") {
			r.files = append(r.files, n)
		}
	}
	return len(p), nil
}

// runTraced runs cfg on exec, making plan's mistake (nil: none),
// recording the time-space diagram and the progress events, and resolves
// its output. The reference runs without storage and records nothing.
func runTraced(ctx context.Context, exec run.Executor, cfg run.Config, plan *mistake.Plan, workers *run.WorkerCommand, log *slog.Logger) (*traced, error) {
	ref := exec.Traits().Reference
	var tl *report.Timeline
	tap := &restoreTap{dir: cfg.Output}
	if !ref {
		tl = report.NewTimeline()
		cfg.Progress = io.MultiWriter(tl, tap)
	}
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), log, !ref, run.OutputOverwrite)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	env.Mistake, env.WorkerCommand = plan, workers
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
	if tap.err != nil {
		return nil, fmt.Errorf("listing the output at the restore: %w", tap.err)
	}
	t := &traced{cfg: cfg, exec: exec, summary: s, timeline: tl, result: res, steps: plan.Steps(), start: start, beforeRestore: tap.files}
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
