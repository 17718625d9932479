package bench

import (
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// This file is the contract between the parts of rewind bench v2: the
// harness that runs the scenario (scenario.go, harness.go) fills Results;
// the writers (results.json, results.csv, timeline.csv, the table, the
// plots and report.html) and `rewind bench compare` only read it; the
// sweeps (sweep.go) add points and a calibration. Figures that were not
// measured are nil, never zero.

// ResultsVersion is the version of results.json; compare refuses others.
const ResultsVersion = 2

// Results is everything one `rewind bench` measured (results.json).
type Results struct {
	Version int       `json:"version"`
	Started time.Time `json:"started"`
	// Command is the command line that reproduces the run.
	Command  string   `json:"command"`
	Scenario Scenario `json:"scenario"`
	Machine  Machine  `json:"machine"`
	// Calibration is each contestant's capacity, measured by a short
	// unpaced run before a load sweep; empty without one.
	Calibration []Capacity `json:"calibration"`
	// Order is the contestants' run order (interleaved: A B C D A B C D …).
	Order []string `json:"order"`
	// Runs are every contestant × repeat × sweep point, in run order.
	Runs []RunResult `json:"runs"`

	// dir and files are where WriteDir wrote, for WriteTable's last line.
	dir   string
	files []string
}

// Scenario is what every contestant gets: the same job, the same live
// input, the same fault moment (before its per-repeat jitter).
type Scenario struct {
	Job      string            `json:"job"`
	Inputs   map[string]string `json:"inputs"`
	SinkMode string            `json:"sink_mode"`
	// Parallelism is subtasks per stage.
	Parallelism int `json:"parallelism"`
	// DurationMs of live input at Rate records/s (summed over inputs);
	// WarmupMs at the start is excluded from the figures.
	DurationMs float64 `json:"duration_ms"`
	WarmupMs   float64 `json:"warmup_ms"`
	Rate       float64 `json:"rate"`
	// CadenceMs is the time between recovery points every contestant is
	// given (recordwise: checkpoint interval; microbatch: trigger;
	// diskphase: finite-job interval).
	CadenceMs float64 `json:"cadence_ms"`
	// Fault is the crash as written (worker=0,at=4s); empty with
	// --fail none. FaultAtMs is its moment before jitter.
	Fault     string  `json:"fault"`
	FaultAtMs float64 `json:"fault_at_ms"`
	// JitterMs bounds the seeded offset added to the fault moment of each
	// repeat (one cadence), so repeats sample the whole cycle.
	JitterMs float64 `json:"jitter_ms"`
	// Workers is where every contestant's workers ran (--workers):
	// inproc (simulated, detect and acquire modelled) or process.
	Workers        string  `json:"workers"`
	DetectDelayMs  float64 `json:"detect_delay_ms"`
	AcquireDelayMs float64 `json:"acquire_delay_ms"`
	Repeat         int     `json:"repeat"`
	Seed           int64   `json:"seed"`
	// Sweep names the swept setting ("checkpoint-interval", "load", ...);
	// empty without a sweep. SweepPoints are its values as written.
	Sweep       string   `json:"sweep,omitempty"`
	SweepPoints []string `json:"sweep_points,omitempty"`
}

// Machine is where the benchmark ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Storage is the kind of durable storage: file or s3.
	Storage string `json:"storage"`
	// CPUModel and LoadAverage (1 minute, when the benchmark started)
	// say what the cores were and how busy the machine already was; empty
	// where the system does not tell (read from /proc on Linux).
	CPUModel    string `json:"cpu_model,omitempty"`
	LoadAverage string `json:"load_average,omitempty"`
}

// Capacity is one contestant's measured unpaced throughput.
type Capacity struct {
	Contestant string  `json:"contestant"`
	RPS        float64 `json:"rps"`
	WallMs     float64 `json:"wall_ms"`
}

// RunResult is one run of one contestant.
type RunResult struct {
	Contestant string `json:"contestant"`
	// Repeat counts from 0; Seq is the run's position in the whole
	// benchmark (the interleaved order).
	Repeat int `json:"repeat"`
	Seq    int `json:"seq"`
	// SweepPoint is the swept value this run used ("" without a sweep).
	SweepPoint string  `json:"sweep_point,omitempty"`
	CadenceMs  float64 `json:"cadence_ms"`
	Rate       float64 `json:"rate"`
	// FaultAtMs is this run's fault moment, jitter included (nil: no
	// fault); Fault is the spec the run was given.
	Fault     string   `json:"fault,omitempty"`
	FaultAtMs *float64 `json:"fault_at_ms"`
	// Correct: the resolved output equals the reference's; Diff says how
	// it differs otherwise. Error is set when the run itself failed.
	Correct bool   `json:"correct"`
	Diff    string `json:"diff,omitempty"`
	Error   string `json:"error,omitempty"`
	// PointsBeforeFault counts the recovery points completed between the
	// end of the warmup and the fault; SteadyState says there were at
	// least two, as the scenario requires (the report says so if not).
	PointsBeforeFault int     `json:"points_before_fault"`
	SteadyState       bool    `json:"steady_state"`
	Figures           Figures `json:"figures"`
	// Summary is the run's own summary (run --summary json).
	Summary *report.Summary `json:"summary,omitempty"`
	// Series is the run over time; written to timeline.csv, not here.
	Series *report.Series `json:"-"`
}

// Figures are one run's numbers. Steady-state figures come from the
// window between the warmup and the fault (the whole run after the warmup
// without one); the bill from the run's recoveries.
type Figures struct {
	ThroughputRPS *float64 `json:"throughput_rps"`
	LatencyP50Ms  *float64 `json:"latency_p50_ms"`
	LatencyP99Ms  *float64 `json:"latency_p99_ms"`
	LatencyMaxMs  *float64 `json:"latency_max_ms"`
	// CheckpointMs is the median duration of the recovery points
	// completed before the fault.
	CheckpointMs *float64 `json:"checkpoint_ms"`

	DetectMs           *float64 `json:"detect_ms"`
	AcquireMs          *float64 `json:"acquire_ms"`
	RestoreMs          *float64 `json:"restore_ms"`
	RestoreBytes       *int64   `json:"restore_bytes"`
	ReprocessedRecords *int64   `json:"reprocessed_records"`
	ReprocessMs        *float64 `json:"reprocess_ms"`
	CatchUpMs          *float64 `json:"catch_up_ms"`
	RecoveredMs        *float64 `json:"recovered_ms"`
	// PredictedCatchUpMs is catch-up ≈ outage × rate / (capacity − rate)
	// for a load sweep point (nil without a calibration).
	PredictedCatchUpMs *float64 `json:"predicted_catch_up_ms"`
	// Modelled names the bill's parts that are modelled delays.
	Modelled []string `json:"modelled"`
	// Measured names the bill's parts (detect, acquire) measured on a
	// worker process that was SIGKILLed and replaced (--workers process):
	// detect from the kill to the broken connection, acquire from the
	// replacement's start to its ready. Inproc runs have none.
	Measured []string `json:"measured"`

	DuplicateRows   int64   `json:"duplicate_rows"`
	ConflictingRows int64   `json:"conflicting_rows"`
	LostRecords     int64   `json:"lost_records"`
	WallMs          float64 `json:"wall_ms"`
}

// Failed reports whether any run failed or produced a wrong result.
func (r *Results) Failed() bool {
	for _, run := range r.Runs {
		if run.Error != "" || !run.Correct {
			return true
		}
	}
	return false
}

// SweepPoint is one value of a swept setting (--sweep NAME=V1,V2,…). The
// harness runs every contestant × repeat at every point.
type SweepPoint struct {
	// Label is the value as written ("1s", "80%").
	Label string
	// Cadence replaces the scenario's cadence for this point (0: keep it).
	Cadence time.Duration
	// Load is the fraction of each contestant's own measured capacity
	// (Results.Calibration) to offer; 0 keeps the scenario's rate.
	Load float64
	// Parallelism replaces the scenario's subtasks per stage (0: keep it).
	Parallelism int
}
