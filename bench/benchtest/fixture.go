// Package benchtest builds synthetic bench.Results shaped like a real
// `rewind bench --repeat 3`, for testing what reads them (the files, the
// table, the plots, the page, compare) without running anything: four
// contestants, seeded fault moments jittered within one cadence, 100 ms
// buckets with the backlog building while a contestant is down and
// draining during catch-up, recovery points, the crash's phases and the
// modelled detect and acquire delays. It is not a measurement.
package benchtest

import (
	"fmt"
	"math"
	"math/rand"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/diskphase"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
)

// Options shape the fixture.
type Options struct {
	Seed    int64
	Repeats int // 3 when 0
	// Contestants rename the four default shapes in order (a long name
	// tests a table's width); nil keeps the default names.
	Contestants []string
	// Sweep and SweepPoints add a checkpoint-interval sweep: every
	// contestant × repeat runs at each point (a cadence as written: 500ms).
	Sweep       string
	SweepPoints []string
	// Problems makes one run of diskphase wrong, one of microbatch crash
	// before steady state, and the fault of one recordwise/unaligned run
	// never fire.
	Problems bool
	// Slower multiplies every latency and recovery time (a "NEW" run to
	// compare with an "OLD" one).
	Slower float64
}

// shape is one contestant's behaviour.
type shape struct {
	name                 string
	kind                 string  // recovery point kind in the events
	p50, p99             float64 // steady latency, ms
	pointMs              float64 // checkpoint duration
	restoreMs            float64
	restoreBytes         int64
	capacity             float64 // records/s when catching up
	steadyLag            float64 // records
	reprocessFromPointMs bool    // re-reads from the last recovery point
}

// shapes are the default contestants' behaviours, in the order of
// bench.DefaultContestants of the executors (recordwise's two barrier
// modes, microbatch, diskphase): the names come from the executors.
var shapes = named([]shape{
	{"", "checkpoint", 4, 25, 120, 150, 12 << 20, 620_000, 2_000, true},
	{"", "checkpoint", 4, 18, 60, 170, 14 << 20, 600_000, 2_000, true},
	{"", "batch", 180, 420, 40, 40, 64 << 10, 700_000, 30_000, true},
	{"", "finite job", 900, 1900, 300, 400, 2 << 20, 500_000, 120_000, true},
})

func named(ss []shape) []shape {
	names := strings.Split(bench.DefaultContestants([]run.Executor{recordwise.Executor{}, microbatch.Executor{}, diskphase.Executor{}}), ",")
	if len(names) != len(ss) {
		panic(fmt.Sprintf("benchtest: %d default contestants for %d shapes", len(names), len(ss)))
	}
	for i := range ss {
		ss[i].name = names[i]
	}
	return ss
}

const (
	durationMs = 10_000.0
	warmupMs   = 2_000.0
	rate       = 250_000.0 // records/s
	cadenceMs  = 1_000.0
	faultAtMs  = 5_000.0
	detectMs   = 500.0
	acquireMs  = 300.0
)

// Results builds the fixture. The same options give the same Results.
func Results(o Options) *bench.Results {
	if o.Repeats == 0 {
		o.Repeats = 3
	}
	if o.Slower == 0 {
		o.Slower = 1
	}
	rng := rand.New(rand.NewSource(o.Seed))
	res := &bench.Results{
		Version: bench.ResultsVersion,
		Started: time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC),
		Command: fmt.Sprintf("rewind bench --repeat %d --duration 10s --rate 250000 --fail worker=0,at=5s --seed %d", o.Repeats, o.Seed),
		Scenario: bench.Scenario{
			Job: "keyed-count", Inputs: map[string]string{"events": "gen:keys=1000,rate=250000"},
			SinkMode: "append", Parallelism: 2,
			DurationMs: durationMs, WarmupMs: warmupMs, Rate: rate, CadenceMs: cadenceMs,
			Fault: "worker=0,at=5s", FaultAtMs: faultAtMs, JitterMs: cadenceMs,
			DetectDelayMs: detectMs, AcquireDelayMs: acquireMs,
			Repeat: o.Repeats, Seed: o.Seed, Sweep: o.Sweep, SweepPoints: o.SweepPoints,
		},
		Machine: bench.Machine{CPUs: 2, GOMAXPROCS: 2, GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", Storage: "file"},
	}
	names := make([]string, len(shapes))
	for i, s := range shapes {
		names[i] = s.name
		if i < len(o.Contestants) {
			names[i] = o.Contestants[i]
		}
	}
	res.Order = names
	points := o.SweepPoints
	if len(points) == 0 {
		points = []string{""}
	}
	seq := 0
	for _, pt := range points {
		cadence := cadenceMs
		if pt != "" {
			if d, err := time.ParseDuration(pt); err == nil {
				cadence = float64(d.Milliseconds())
			}
		}
		for rep := 0; rep < o.Repeats; rep++ {
			// One jitter per repeat, the same for every contestant: they all
			// get the same fault moment.
			jitter := rng.Float64() * cadence
			for i, s := range shapes {
				s.name = names[i]
				run := makeRun(rng, s, o, rep, seq, pt, cadence, faultAtMs+jitter)
				res.Runs = append(res.Runs, run)
				seq++
			}
		}
	}
	return res
}

func f64(v float64) *float64 { return &v }
func i64(v int64) *int64     { return &v }

func makeRun(rng *rand.Rand, s shape, o Options, rep, seq int, point string, cadence, faultAt float64) bench.RunResult {
	k := o.Slower
	noise := func() float64 { return 1 + 0.15*(rng.Float64()-0.5) }
	run := bench.RunResult{
		Contestant: s.name, Repeat: rep, Seq: seq, SweepPoint: point,
		CadenceMs: cadence, Rate: rate, Fault: "worker=0,at=5s", FaultAtMs: f64(faultAt),
		Correct: true, SteadyState: true,
	}
	unfired := o.Problems && s.name == names(o)[1] && rep == 0
	if o.Problems && s.name == names(o)[2] && rep == 2 {
		// The fault struck before the second recovery point.
		faultAt = warmupMs + cadence*0.5
		run.FaultAtMs = f64(faultAt)
	}
	// Recovery points every cadence, offset a little per contestant.
	var lastPoint float64
	points := 0
	var events []report.SeriesEvent
	id := int64(0)
	for t := cadence * (0.9 + 0.2*rng.Float64()); t < durationMs; t += cadence {
		if !unfired && t > faultAt && t < faultAt+detectMs+acquireMs+s.restoreMs {
			continue
		}
		id++
		events = append(events, report.SeriesEvent{TMs: t, Kind: s.kind, ID: id, Status: report.PointCompleted})
		if t < faultAt {
			lastPoint = t
			if t > warmupMs {
				points++
			}
		}
	}
	run.PointsBeforeFault = points
	run.SteadyState = points >= 2
	p50, p99 := s.p50*k*noise(), s.p99*k*noise()
	run.Figures = bench.Figures{
		ThroughputRPS: f64(rate * (1 + 0.01*(rng.Float64()-0.5))),
		LatencyP50Ms:  f64(p50), LatencyP99Ms: f64(p99), LatencyMaxMs: f64(p99 * 1.8),
		CheckpointMs: f64(s.pointMs * k * noise()),
		WallMs:       durationMs + 200*rng.Float64(),
	}
	series := &report.Series{BucketMs: report.SeriesBucketMs, Events: events}
	var ph *report.Phase
	var restored, caught, rereadEnd float64
	var reread float64
	if !unfired {
		restore := s.restoreMs * k * noise()
		detected, acquired := faultAt+detectMs, faultAt+detectMs+acquireMs
		restored = acquired + restore
		reread = (faultAt - lastPoint) / 1000 * rate
		outage := restored - faultAt
		backlog := outage/1000*rate + reread
		capacity := s.capacity / k
		catchUp := backlog / (capacity - rate) * 1000
		caught = restored + catchUp
		rereadEnd = restored + reread/capacity*1000
		ph = &report.Phase{FaultMs: faultAt, DetectedMs: f64(detected), AcquiredMs: f64(acquired),
			RestoredMs: f64(restored), CaughtUpMs: f64(caught)}
		series.Phases = []report.Phase{*ph}
		series.Events = append(series.Events, report.SeriesEvent{TMs: faultAt, Kind: "crash"})
		run.Figures.DetectMs, run.Figures.AcquireMs = f64(detectMs), f64(acquireMs)
		run.Figures.Modelled = []string{"detect", "acquire"}
		run.Figures.RestoreMs = f64(restore)
		run.Figures.RestoreBytes = i64(int64(float64(s.restoreBytes) * noise()))
		run.Figures.ReprocessedRecords = i64(int64(reread))
		run.Figures.ReprocessMs = f64(rereadEnd - restored)
		run.Figures.CatchUpMs = f64(catchUp)
		run.Figures.RecoveredMs = f64(caught - faultAt)
		if s.name == names(o)[0] {
			// An append sink republishes what the replay makes again.
			run.Figures.DuplicateRows = int64(reread / 250)
		}
	}
	series.Buckets = buckets(rng, s, p50, p99, ph, reread, rereadEnd)
	run.Series = series
	run.Summary = &report.Summary{Job: "keyed-count", Executor: s.name, SinkMode: "append",
		WallMs: run.Figures.WallMs, ThroughputRPS: *run.Figures.ThroughputRPS, Crashes: 1}
	if unfired {
		run.Summary.Crashes = 0
		run.Summary.UnfiredFaults = []string{run.Fault}
	} else {
		run.Summary.Recoveries = []report.Recovery{{Cause: "worker killed", AtMs: f64(faultAt),
			DetectMs: run.Figures.DetectMs, AcquireMs: run.Figures.AcquireMs, Modelled: run.Figures.Modelled,
			RestoreMs: run.Figures.RestoreMs, RestoreBytes: run.Figures.RestoreBytes,
			ReprocessedRecords: run.Figures.ReprocessedRecords, ReprocessMs: run.Figures.ReprocessMs,
			CatchUpMs: run.Figures.CatchUpMs, RecoveredMs: run.Figures.RecoveredMs}}
	}
	if o.Problems && s.name == names(o)[3] && rep == 1 {
		run.Correct = false
		run.Diff = "12 rows missing, first key 17 (want count 250, got none)"
	}
	return run
}

// names are the contestants' names under o.
func names(o Options) []string {
	out := make([]string, len(shapes))
	for i, s := range shapes {
		out[i] = s.name
		if i < len(o.Contestants) {
			out[i] = o.Contestants[i]
		}
	}
	return out
}

// buckets simulates the run in 100 ms steps: steady until the fault, no
// progress while down (the lag grows by the offered input), the lag
// jumping by what the restore rewound, then draining at capacity − rate.
func buckets(rng *rand.Rand, s shape, p50, p99 float64, ph *report.Phase, reread, rereadEnd float64) []report.Bucket {
	const w = report.SeriesBucketMs
	perBucket := rate * w / 1000
	capPerBucket := s.capacity * w / 1000
	var out []report.Bucket
	lag := s.steadyLag
	rewound := false
	for t := 0.0; t < durationMs; t += w {
		b := report.Bucket{TMs: t, Offered: int64(perBucket)}
		jit := 1 + 0.2*rng.Float64()
		switch {
		case ph != nil && t+w > ph.FaultMs && t < *ph.RestoredMs:
			lag += perBucket
			b.Processed = 0
		case ph != nil && t >= *ph.RestoredMs && t < *ph.CaughtUpMs:
			if !rewound {
				lag += reread
				rewound = true
			}
			b.Processed = int64(capPerBucket)
			if t < rereadEnd {
				b.Reread = int64(math.Min(capPerBucket, reread))
			}
			lag = math.Max(s.steadyLag, lag+perBucket-capPerBucket)
			since := t + w/2 - ph.FaultMs
			b.Latency = &report.Latency{P50: since * 0.6, P99: since * jit, Max: since * 1.1}
			b.Visible = b.Processed / 10
		default:
			lag = s.steadyLag * jit
			b.Processed = b.Offered
			b.Latency = &report.Latency{P50: p50 * jit, P99: p99 * jit, Max: p99 * 1.8}
			b.Visible = b.Processed / 10
		}
		b.Lag = int64(lag)
		out = append(out, b)
	}
	return out
}
