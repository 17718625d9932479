package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// The state table (issue #18): how recovery points, restore and memory
// grow with the number of keys. Each row is one `rewind run` of a stateful
// job over a generated input long enough that every key is drawn (in
// expectation fewer than one key is missed), with worker 0 killed three
// quarters of the way through, started as a child process so its peak RSS
// is its own. What the run leaves in storage is then read: the recovery
// points (through the executor's inspect.Inspector) and every object once,
// timed, for the storage's read bandwidth beside the restore's.

// StateCase is one row to measure.
type StateCase struct {
	Job        string `json:"job"`
	Keys       int64  `json:"keys"`
	Records    int64  `json:"records"`
	Contestant string `json:"contestant"`
	// Executor runs it; Args are the `rewind run` arguments (the input
	// and the crash included) without output, storage, summary or series.
	Executor string   `json:"executor"`
	Args     []string `json:"args"`
}

// StateRecords is the input that draws each of keys uniform keys at least
// once in expectation: keys × (ln keys + 1) leaves keys·e^-(ln keys+1) =
// 1/e keys undrawn on average; never below floor, so the smallest runs
// still last long enough for recovery points before the crash.
func StateRecords(keys, floor int64) int64 {
	n := int64(math.Ceil(float64(keys) * (math.Log(float64(keys)) + 1)))
	return max(n, floor)
}

// StateCaseArgs are the arguments of a row: the job over records
// generated records of keys keys in 2 partitions at parallelism 2, worker
// 0 killed after three quarters of them. windowed-sum gets windows of a
// quarter of each partition's event time (1 ms a record), so a window
// holds nearly every key and windows still close during the run. variant
// is (flag, value) of the contestant's variant, or empty.
func StateCaseArgs(j, executor string, variant []string, keys, records int64) []string {
	args := append([]string{"run", "--executor", executor}, variant...)
	args = append(args, "--job", j, "--parallelism", "2",
		"--input", fmt.Sprintf("gen:records=%d,keys=%d,partitions=2", records, keys),
		"--fail", fmt.Sprintf("worker=0,after-records=%d", records*3/4))
	if j == "windowed-sum" {
		args = append(args, "--window", (time.Duration(records/2/4) * time.Millisecond).String())
	}
	return args
}

// StatePlan is one state table.
type StatePlan struct {
	Cases     []StateCase
	Child     Child
	Executors map[string]run.Executor
	// Scratch holds each run's output and storage (removed after it).
	Scratch  string
	Command  string
	Progress func(format string, args ...any)
}

// StateResults are what `rewind bench state` measured (state.json).
type StateResults struct {
	Version int        `json:"version"`
	Started time.Time  `json:"started"`
	Command string     `json:"command"`
	Machine Machine    `json:"machine"`
	Rows    []StateRow `json:"rows"`
}

// StateVersion is the version of state.json.
const StateVersion = 1

// StateRow is one case as measured.
type StateRow struct {
	StateCase
	// Command reproduces the run (a fresh output and storage).
	Command string `json:"command"`
	// Points counts complete recovery points left in storage; PointBytes
	// is the largest one's size there, PointMedianMs the median duration
	// of the completed ones as the executor timed them.
	Points        int     `json:"points"`
	PointBytes    int64   `json:"point_bytes"`
	PointMedianMs float64 `json:"point_median_ms"`
	// The recovery bill of the crash, from the run's summary.
	RestoreMs    float64 `json:"restore_ms"`
	RestoreBytes int64   `json:"restore_bytes"`
	ReprocessMs  float64 `json:"reprocess_ms"`
	RecoveredMs  float64 `json:"recovered_ms"`
	// RestoreMBps is RestoreBytes over RestoreMs; ReadMBps the storage's
	// read bandwidth just after, every object of the run read once
	// (ReadBytes of them), the same page cache the restore met.
	RestoreMBps float64 `json:"restore_mbps"`
	ReadMBps    float64 `json:"read_mbps"`
	ReadBytes   int64   `json:"read_bytes"`
	// RPS is the run's throughput (records read over its wall time),
	// MaxRSSBytes the child's peak resident set.
	RPS         float64 `json:"rps"`
	WallMs      float64 `json:"wall_ms"`
	MaxRSSBytes int64   `json:"max_rss_bytes"`
	Error       string  `json:"error,omitempty"`
}

// RunState measures every case once, in order. A run that fails is
// recorded in its row and the table goes on.
func RunState(ctx context.Context, p StatePlan) (*StateResults, error) {
	res := &StateResults{Version: StateVersion, Started: time.Now().UTC(), Command: p.Command,
		Machine: machineOf("file://" + p.Scratch)}
	for i, c := range p.Cases {
		dir := filepath.Join(p.Scratch, fmt.Sprintf("state-%02d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		row := StateRow{StateCase: c, Command: CommandLine(append(c.Args, "--summary", "json")) +
			` --output "$(mktemp -d)" --storage "file://$(mktemp -d)"`}
		err := p.measure(ctx, c, dir, &row)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			row.Error = firstLine(err.Error())
		}
		if p.Progress != nil {
			p.Progress("bench state [%d/%d] %s", i+1, len(p.Cases), row.progressText())
		}
		_ = os.RemoveAll(dir)
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

func (p StatePlan) measure(ctx context.Context, c StateCase, dir string, row *StateRow) error {
	seriesFile := filepath.Join(dir, "series.json")
	storageURL := "file://" + filepath.Join(dir, "storage")
	args := append(append([]string{}, c.Args...), "--summary", "json", "--progress", "none",
		"--output", filepath.Join(dir, "out"), "--storage", storageURL, "--series", seriesFile)
	cr, err := p.Child.Run(ctx, args)
	if cr != nil {
		row.MaxRSSBytes, row.WallMs = cr.MaxRSSBytes, float64(cr.Wall.Microseconds())/1000
	}
	if err != nil {
		return err
	}
	s := cr.Summary
	row.RPS = s.ThroughputRPS
	if len(s.Recoveries) == 0 {
		return fmt.Errorf("the crash did not fire (%s)", strings.Join(s.UnfiredFaults, ", "))
	}
	r := s.Recoveries[0]
	row.RestoreMs, row.RestoreBytes = orZero(r.RestoreMs), derefInt(r.RestoreBytes)
	row.ReprocessMs, row.RecoveredMs = orZero(r.ReprocessMs), orZero(r.RecoveredMs)
	if row.RestoreMs > 0 {
		row.RestoreMBps = float64(row.RestoreBytes) / 1e6 / (row.RestoreMs / 1000)
	}
	if row.PointMedianMs, err = medianPointMs(seriesFile); err != nil {
		return err
	}
	st, err := readStorage(ctx, storageURL, p.Executors[c.Executor])
	if err != nil {
		return err
	}
	row.Points, row.PointBytes, row.ReadBytes, row.ReadMBps = st.points, st.largestBytes, st.readBytes, st.readMBps
	return nil
}

// medianPointMs is the median duration of the completed recovery points
// in the series file `rewind run --series` wrote.
func medianPointMs(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var s report.Series
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	var ms []float64
	for _, e := range s.Events {
		if e.Status == report.PointCompleted && e.DurationMs != nil {
			ms = append(ms, *e.DurationMs)
		}
	}
	if len(ms) == 0 {
		return 0, nil
	}
	return StatOf(ms).Median, nil
}

func orZero(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}

func derefInt(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

func (r StateRow) progressText() string {
	head := fmt.Sprintf("%s, %d keys, %s", r.Job, r.Keys, r.Contestant)
	if r.Error != "" {
		return head + ": FAILED: " + r.Error
	}
	return fmt.Sprintf("%s: point %.1f MB in %.0f ms, restore %.1f MB in %.0f ms (%.0f MB/s; storage reads %.0f MB/s), %.2f M rec/s, peak RSS %.0f MB",
		head, float64(r.PointBytes)/1e6, r.PointMedianMs, float64(r.RestoreBytes)/1e6, r.RestoreMs, r.RestoreMBps, r.ReadMBps,
		r.RPS/1e6, float64(r.MaxRSSBytes)/1e6)
}
