package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// COST (McSherry, Isard, Murray: "Scalability! But at what COST?") asks
// how many cores a parallel system needs before it beats one good thread.
// CostPlan measures it the way a user would: every contestant reads the
// same bounded input unpaced, without a crash, at each parallelism, and
// its throughput is set against the single-threaded reference's over the
// same input in the same run. The recovery machinery is what the
// contestants pay for; the ratio says how much.

// DefaultCostRecords is the input of each COST run: long enough that
// start-up and the last flush weigh little, short enough for make bench.
const DefaultCostRecords = 2_000_000

// CostPlan is one COST measurement.
type CostPlan struct {
	// Plan.Config carries what every run shares (sink mode, seed,
	// params); Job, Executor, Options, Inputs, Output, Storage,
	// Parallelism and Fails are set per run. Plan.Options, Scratch,
	// Storage, Executors, Alloc, Log and Progress are as in a bench.
	Plan
	Jobs         []string
	Parallelisms []int
	// Records is the input's length, summed over the job's inputs.
	Records int64
	// Repeat runs everything this many times, interleaved; the figures
	// are medians.
}

// CostResults are what `rewind bench cost` measured (cost.json).
type CostResults struct {
	Version int       `json:"version"`
	Started time.Time `json:"started"`
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`
	Records int64     `json:"records"`
	Rows    []CostRow `json:"rows"`
}

// CostRow is one job × contestant × parallelism (the reference has one
// row per job, at parallelism 1).
type CostRow struct {
	Job         string `json:"job"`
	Contestant  string `json:"contestant"`
	Parallelism int    `json:"parallelism"`
	// Reference marks the single-threaded reference's row.
	Reference bool `json:"reference,omitempty"`
	// RPS are the records per second of each repeat (input records over
	// the run's wall time); MedianRPS their median.
	RPS       []float64 `json:"rps"`
	MedianRPS float64   `json:"median_rps"`
	// VsReference is MedianRPS over the reference's median for the same
	// job: the COST ratio (≥ 1 means it beats one thread).
	VsReference float64 `json:"vs_reference"`
	// Wrong counts runs whose resolved output differed from the
	// reference's; Error is the first run's failure, if one failed.
	Wrong int    `json:"wrong"`
	Error string `json:"error,omitempty"`
}

// CostVersion is the version of cost.json.
const CostVersion = 1

// RunCost runs the plan: per repeat, per job, the reference then every
// contestant at every parallelism. A contestant's failure or wrong result
// is recorded in its row and the measurement goes on; an error means it
// cannot (bad plan, the reference failing, ctx cancelled).
func RunCost(ctx context.Context, p CostPlan) (*CostResults, error) {
	if len(p.Jobs) == 0 || len(p.Contestants) == 0 || len(p.Parallelisms) == 0 || p.Records <= 0 {
		return nil, fmt.Errorf("a COST measurement needs jobs, contestants, parallelisms and a positive record count")
	}
	for _, j := range p.Jobs {
		if _, err := job.Build(j, p.Config.Params); err != nil {
			return nil, err
		}
	}
	ref, err := p.referenceExec()
	if err != nil {
		return nil, err
	}
	p.Repeat = max(p.Repeat, 1)
	res := &CostResults{Version: CostVersion, Started: time.Now().UTC(), Command: p.Command,
		Machine: machineOf(p.storageFor("")), Records: p.Records}
	rows := map[string]*CostRow{}
	row := func(j, c string, par int) *CostRow {
		k := costKey(j, c, par)
		if rows[k] == nil {
			rows[k] = &CostRow{Job: j, Contestant: c, Parallelism: par}
		}
		return rows[k]
	}
	total := p.Repeat * len(p.Jobs) * (1 + len(p.Contestants)*len(p.Parallelisms))
	n := 0
	for r := range p.Repeat {
		for _, j := range p.Jobs {
			inputs := costInputs(j, p.Config.Seed, p.Records)
			n++
			want, rps, err := p.costRun(ctx, j, ref.Name(), nil, 1, inputs, nil, fmt.Sprintf("cost-%s-ref-%d", j, r))
			if err != nil {
				return nil, fmt.Errorf("reference run of %s: %w", j, err)
			}
			rr := row(j, ref.Name(), 1)
			rr.Reference = true
			rr.RPS = append(rr.RPS, rps)
			p.costSay(n, total, j, ref.Name(), 1, rps, "")
			for _, c := range p.Contestants {
				for _, par := range p.Parallelisms {
					n++
					label := fmt.Sprintf("cost-%s-%s-p%d-%d", j, strings.ReplaceAll(c.Name(), "/", "-"), par, r)
					_, rps, err := p.costRun(ctx, j, c.Executor, p.optionsOf(c), par, inputs, want, label)
					cr := row(j, c.Name(), par)
					if ctx.Err() != nil {
						return nil, ctx.Err()
					}
					switch {
					case err == errWrongResult:
						cr.Wrong++
						cr.RPS = append(cr.RPS, rps)
					case err != nil:
						if cr.Error == "" {
							cr.Error = firstLine(err.Error())
						}
					default:
						cr.RPS = append(cr.RPS, rps)
					}
					p.costSay(n, total, j, c.Name(), par, rps, errText(err))
				}
			}
		}
	}
	// Per job, the reference, then every contestant at every parallelism.
	for _, j := range p.Jobs {
		for _, k := range costKeys(j, ref.Name(), p.Contestants, p.Parallelisms) {
			cr := *rows[k]
			if len(cr.RPS) > 0 {
				cr.MedianRPS = StatOf(cr.RPS).Median
			}
			res.Rows = append(res.Rows, cr)
		}
	}
	refRPS := map[string]float64{}
	for _, cr := range res.Rows {
		if cr.Reference {
			refRPS[cr.Job] = cr.MedianRPS
		}
	}
	for k := range res.Rows {
		if ref := refRPS[res.Rows[k].Job]; ref > 0 {
			res.Rows[k].VsReference = res.Rows[k].MedianRPS / ref
		}
	}
	return res, nil
}

func costKey(j, c string, par int) string { return fmt.Sprintf("%s|%s|%d", j, c, par) }

func costKeys(j, ref string, cs []Contestant, pars []int) []string {
	out := []string{costKey(j, ref, 1)}
	for _, c := range cs {
		for _, par := range pars {
			out = append(out, costKey(j, c.Name(), par))
		}
	}
	return out
}

// errWrongResult marks a COST run whose output differed from the
// reference's: its speed is kept, flagged.
var errWrongResult = fmt.Errorf("wrong result")

func errText(err error) string {
	if err == nil {
		return ""
	}
	return firstLine(err.Error())
}

// costRun runs one executor over inputs to the end and returns its
// resolved output and records per second; with want, a differing output
// is errWrongResult.
func (p CostPlan) costRun(ctx context.Context, j, executor string, opts run.Options, par int, inputs map[string]string, want *sink.Table, label string) (*sink.Table, float64, error) {
	cfg := p.Config
	cfg.Job, cfg.Executor, cfg.Options, cfg.Parallelism, cfg.Inputs, cfg.Fails = j, executor, opts, par, inputs, nil
	cfg.Output, cfg.Storage = filepath.Join(p.Scratch, label, "out"), p.storageFor(label)
	exec := p.Executors[executor]
	s, got, err := p.runOnce(ctx, cfg, exec != nil && !exec.Traits().Reference)
	if err != nil {
		return nil, 0, err
	}
	if !(s.WallMs > 0) {
		return nil, 0, fmt.Errorf("%s on %s: a run of %.3f ms is too short to time", executor, j, s.WallMs)
	}
	rps := float64(p.Records) / (s.WallMs / 1000)
	if want != nil && got.Diff(want, 1) != "" {
		return got, rps, errWrongResult
	}
	return got, rps, nil
}

func (p CostPlan) costSay(n, total int, j, c string, par int, rps float64, problem string) {
	if p.Progress == nil {
		return
	}
	line := fmt.Sprintf("bench cost [%d/%d] %s on %s at parallelism %d: %.2f M records/s", n, total, j, c, par, rps/1e6)
	if problem != "" {
		line = fmt.Sprintf("bench cost [%d/%d] %s on %s at parallelism %d: %s", n, total, j, c, par, problem)
	}
	fmt.Fprintln(p.Progress, line)
}

// costInputs are records generated records over the job's inputs (split
// between the join's two), unpaced, in two partitions whatever the
// parallelism, so every run of a job reads the same records.
func costInputs(j string, seed int64, records int64) map[string]string {
	ins := GenInputs(j, seed, float64(records), time.Second, 2)
	out := make(map[string]string, len(ins))
	for _, n := range slices.Sorted(maps.Keys(ins)) {
		out[n] = unpaced(ins[n])
	}
	return out
}
