package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The latency table (issue #16): each row is one `rewind run` with a
// paced generated input, started as a child process, and its figures are
// that command's own summary, so a user who pastes the row's command gets
// the same kind of figure (on their machine, at their load).

// LatencyCase is one row to measure.
type LatencyCase struct {
	// Name labels the row (the contestant and its settings); SinkMode is
	// the --sink-mode it runs with.
	Name     string `json:"name"`
	SinkMode string `json:"sink_mode"`
	// Args are the `rewind run` arguments that define the scenario, the
	// input included; the output, storage and summary flags are added.
	Args []string `json:"args"`
	// Rate is the offered rate the input is paced at, records/s.
	Rate float64 `json:"rate"`
	// TargetP99Ms is the p99 the design promises (0: none), Target how the
	// row's target reads ("p99 ≤ 30 ms", "bounded by the checkpoint
	// interval, 1 s").
	TargetP99Ms float64 `json:"target_p99_ms,omitempty"`
	Target      string  `json:"target"`
	// Workers is where the run's workers are (--workers: inproc or
	// process), so a table can set one mode's rows against the other's.
	Workers string `json:"workers,omitempty"`
}

// LatencyPlan is one latency table.
type LatencyPlan struct {
	Cases []LatencyCase
	Child Child
	// Scratch holds each run's output and storage.
	Scratch string
	// Command is the command line that measures the table again.
	Command  string
	Progress func(format string, args ...any)
}

// LatencyResults are what `rewind bench latency` measured (latency.json).
type LatencyResults struct {
	Version int          `json:"version"`
	Started time.Time    `json:"started"`
	Command string       `json:"command"`
	Machine Machine      `json:"machine"`
	Rows    []LatencyRow `json:"rows"`
}

// LatencyVersion is the version of latency.json.
const LatencyVersion = 1

// LatencyRow is one case as measured.
type LatencyRow struct {
	LatencyCase
	// Command reproduces the row: the case's `rewind run` with a fresh
	// output and storage.
	Command string `json:"command"`
	// P50Ms, P99Ms and MaxMs are the run's summary latency_ms; RPS its
	// throughput_rps (records read over the run's wall time).
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	RPS   float64 `json:"rps"`
	// Holds says whether the p99 target holds (nil: no numeric target).
	Holds *bool `json:"holds,omitempty"`
	// Summary is the child's summary line as printed, the source of the
	// figures above; Error its failure.
	Summary string `json:"summary,omitempty"`
	Error   string `json:"error,omitempty"`
}

// LatencyRunArgs are the arguments of c's run with its output in dir/out
// and its storage in dir/storage.
func LatencyRunArgs(c LatencyCase, dir string) []string {
	return append(append([]string{"run"}, c.Args...), "--sink-mode", c.SinkMode, "--summary", "json",
		"--progress", "none", "--output", filepath.Join(dir, "out"), "--storage", "file://"+filepath.Join(dir, "storage"))
}

// latencyCommand is the row's command as a user runs it: a fresh
// directory for the output and one for the storage.
func latencyCommand(c LatencyCase) string {
	args := append(append([]string{"run"}, c.Args...), "--sink-mode", c.SinkMode, "--summary", "json")
	return CommandLine(args) + ` --output "$(mktemp -d)" --storage "file://$(mktemp -d)"`
}

// RunLatency measures every case once, in order. A run that fails is
// recorded in its row and the table goes on; an error means it cannot
// (ctx cancelled, scratch unusable).
func RunLatency(ctx context.Context, p LatencyPlan) (*LatencyResults, error) {
	res := &LatencyResults{Version: LatencyVersion, Started: time.Now().UTC(), Command: p.Command,
		Machine: machineOf("file://" + p.Scratch)}
	for i, c := range p.Cases {
		dir := filepath.Join(p.Scratch, fmt.Sprintf("latency-%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		row := LatencyRow{LatencyCase: c, Command: latencyCommand(c)}
		cr, err := p.Child.Run(ctx, LatencyRunArgs(c, dir))
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			row.Error = firstLine(err.Error())
		case cr.Summary.LatencyMs == nil:
			row.Error = "the run's summary has no latency"
		default:
			l := cr.Summary.LatencyMs
			row.P50Ms, row.P99Ms, row.MaxMs, row.RPS = l.P50, l.P99, l.Max, cr.Summary.ThroughputRPS
			row.Summary = cr.SummaryLine
			if c.TargetP99Ms > 0 {
				row.Holds = ptr(row.P99Ms <= c.TargetP99Ms)
			}
		}
		if p.Progress != nil {
			if row.Error != "" {
				p.Progress("bench latency [%d/%d] %s %s: FAILED: %s", i+1, len(p.Cases), c.Name, c.SinkMode, row.Error)
			} else {
				p.Progress("bench latency [%d/%d] %s %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms at %.0f records/s", i+1, len(p.Cases),
					c.Name, c.SinkMode, row.P50Ms, row.P99Ms, row.MaxMs, row.RPS)
			}
		}
		_ = os.RemoveAll(dir)
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}
