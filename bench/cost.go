package bench

import (
	"cmp"
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
	// Workers are where each contestant's workers run, each measured in
	// turn (nil: Config.Workers alone). A contestant whose executor cannot
	// run worker processes is measured inproc only.
	Workers []run.WorkerMode
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
	// Workers is process for a run with worker processes (empty:
	// inproc).
	Workers string `json:"workers,omitempty"`
	// Reference marks the single-threaded reference's row.
	Reference bool `json:"reference,omitempty"`
	// RPS are the records per second of each repeat (input records over
	// the run's wall time); MedianRPS their median.
	RPS       []float64 `json:"rps"`
	MedianRPS float64   `json:"median_rps"`
	// VsReference is MedianRPS over the reference's median for the same
	// job: the COST ratio (≥ 1 means it beats one thread).
	VsReference float64 `json:"vs_reference"`
	// VsInproc is, for a row with worker processes, MedianRPS over the
	// same contestant's inproc row in the same run: the price of the
	// process boundary (0 when there is none to compare with).
	VsInproc float64 `json:"vs_inproc,omitempty"`
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
	row := func(j string, c costSeat) *CostRow {
		k := c.key(j)
		if rows[k] == nil {
			rows[k] = &CostRow{Job: j, Contestant: c.name, Parallelism: c.par, Workers: c.workers()}
		}
		return rows[k]
	}
	refSeat := costSeat{name: ref.Name(), par: 1}
	seats := p.seats()
	total := p.Repeat * len(p.Jobs) * (1 + len(seats))
	if err := p.warmUp(ctx, ref.Name(), refSeat); err != nil {
		return nil, err
	}
	n := 0
	for r := range p.Repeat {
		for _, j := range p.Jobs {
			inputs := costInputs(j, p.Config.Seed, p.Records)
			n++
			want, rps, err := p.costRun(ctx, j, ref.Name(), nil, refSeat, inputs, nil, fmt.Sprintf("cost-%s-ref-%d", j, r))
			if err != nil {
				return nil, fmt.Errorf("reference run of %s: %w", j, err)
			}
			rr := row(j, refSeat)
			rr.Reference = true
			rr.RPS = append(rr.RPS, rps)
			p.costSay(n, total, j, refSeat, rps, "")
			for _, seat := range seats {
				n++
				label := fmt.Sprintf("cost-%s-%s-%d", j, seat.label(), r)
				_, rps, err := p.costRun(ctx, j, seat.c.Executor, p.optionsOf(seat.c), seat, inputs, want, label)
				cr := row(j, seat)
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
				p.costSay(n, total, j, seat, rps, errText(err))
			}
		}
	}
	// Per job, the reference, then every seat in order.
	for _, j := range p.Jobs {
		for _, seat := range append([]costSeat{refSeat}, seats...) {
			cr := *rows[seat.key(j)]
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
	inproc := map[string]float64{}
	for _, cr := range res.Rows {
		if cr.Workers == "" {
			inproc[costKey(cr.Job, cr.Contestant, cr.Parallelism)] = cr.MedianRPS
		}
	}
	for k := range res.Rows {
		cr := &res.Rows[k]
		if ref := refRPS[cr.Job]; ref > 0 {
			cr.VsReference = cr.MedianRPS / ref
		}
		if in := inproc[costKey(cr.Job, cr.Contestant, cr.Parallelism)]; cr.Workers != "" && in > 0 {
			cr.VsInproc = cr.MedianRPS / in
		}
	}
	return res, nil
}

// costSeat is one contestant at one parallelism with its workers in one
// place: a row of every job's table.
type costSeat struct {
	c    Contestant
	name string
	par  int
	mode run.WorkerMode
}

func (s costSeat) workers() string {
	if s.mode == run.WorkersProcess {
		return string(s.mode)
	}
	return ""
}

func (s costSeat) key(j string) string { return costKey(j, s.name, s.par) + "|" + s.workers() }

// label names the seat's scratch directory.
func (s costSeat) label() string {
	l := fmt.Sprintf("%s-p%d", strings.ReplaceAll(s.name, "/", "-"), s.par)
	if s.workers() != "" {
		l += "-" + s.workers()
	}
	return l
}

// String is how progress lines and the table name the seat.
func (s costSeat) String() string {
	return CostRow{Contestant: s.name, Workers: s.workers()}.seatName()
}

// seats are every contestant at every parallelism in every worker mode
// its executor has, workers outermost, so a table reads inproc first.
func (p CostPlan) seats() []costSeat {
	modes := p.Workers
	if len(modes) == 0 {
		modes = []run.WorkerMode{cmp.Or(p.Config.Workers, run.WorkersInproc)}
	}
	var out []costSeat
	for _, m := range modes {
		for _, c := range p.Contestants {
			if m == run.WorkersProcess && !p.Executors[c.Executor].Traits().ProcessWorkers {
				continue
			}
			for _, par := range p.Parallelisms {
				out = append(out, costSeat{c: c, name: c.Name(), par: par, mode: m})
			}
		}
	}
	return out
}

// warmUp runs each job's reference once, untimed, before anything is
// measured. A process's first run is its slowest (its heap grows, its
// pages fault in): timed, the first job's reference ran at 18–21 M
// records/s where its later repeats ran at 41–57 on keyed-count, which
// put every executor's × reference of a one-repeat bench up to 2.5
// times too high. The contestants need no such run: they follow the
// reference, and worker processes start cold for everybody alike.
func (p CostPlan) warmUp(ctx context.Context, ref string, seat costSeat) error {
	for _, j := range p.Jobs {
		if p.Progress != nil {
			fmt.Fprintf(p.Progress, "bench cost: warm-up run of the reference on %s (not counted)\n", j)
		}
		if _, _, err := p.costRun(ctx, j, ref, nil, seat, costInputs(j, p.Config.Seed, p.Records), nil, "cost-"+j+"-warm-up"); err != nil {
			return fmt.Errorf("reference run of %s (warm-up): %w", j, err)
		}
	}
	return nil
}

func costKey(j, c string, par int) string { return fmt.Sprintf("%s|%s|%d", j, c, par) }

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
func (p CostPlan) costRun(ctx context.Context, j, executor string, opts run.Options, seat costSeat, inputs map[string]string, want *sink.Table, label string) (*sink.Table, float64, error) {
	cfg := p.Config
	cfg.Job, cfg.Executor, cfg.Options, cfg.Parallelism, cfg.Inputs, cfg.Fails = j, executor, opts, seat.par, inputs, nil
	cfg.Workers = cmp.Or(seat.mode, run.WorkersInproc)
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

func (p CostPlan) costSay(n, total int, j string, seat costSeat, rps float64, problem string) {
	c, par := seat.String(), seat.par
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
