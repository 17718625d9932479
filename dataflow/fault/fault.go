// Package fault turns --fail flags into crashes at exact, replayable places.
//
// Two kinds of fault exist:
//   - worker=W,after-records=N kills worker W once the job has read N input
//     records (counted over all sources, from the start of the run);
//     worker=W,at=DURATION kills it at the first read once DURATION has
//     passed since the run started (after-records= may not be added: one
//     kill has one trigger). With after-point=NAME added, either waits
//     until the named point has also been reached once (for example, until
//     the first checkpoint is durable): it fires at the first read once
//     both hold or, when the records (or the time) were there first, at the
//     point itself, so it fires even when the input is read whole before
//     the point is reached;
//   - worker=W,at-point=NAME[,occurrence=K][,after-point=P] kills worker W
//     at a point: at W's own K-th arrival at NAME (default 1) where workers
//     pass it, or at the coordinator's K-th arrival where the coordinator
//     does; arrivals of other workers do not count. With after-point=P,
//     only arrivals after P has been reached once count (W's first part
//     written after the first checkpoint is durable, say). Unlike a named
//     point, it is a worker kill wherever it lands: the coordinator that
//     reaches NAME carries out W's death and goes on;
//   - point=NAME[,occurrence=K] crashes the process role that reaches the
//     named point for the K-th time (default 1). Each executor lists the
//     points it has (rewind run --executor E --list-fail-points);
//   - point=NAME[,occurrence=K],kill=process kills the whole OS process
//     there instead, as SIGKILL would: nothing in memory survives, no
//     deferred cleanup runs, and `rewind run --resume` continues the run
//     from durable storage and the output directory. The run driver's own
//     points (RunPoints), at the end of a run, allow only this kind.
//
// Every fault fires once. The Injector is a plain value guarded by a mutex:
// it decides, the executor carries the crash out (drops the worker's memory,
// buffers and local files, or restarts its coordinator). A worker kill can
// reach the executor through any caller of Read or Point, so the Crash may
// name another worker than the caller's: the caller then kills that worker,
// as it would after a read, and goes on. A process kill is
// carried out by the hook the command sets (KillProcess), since killing the
// process is the command's business and OS-specific.
package fault

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Spec is one parsed --fail value.
type Spec struct {
	// Worker kills: Worker >= 0 and one trigger, AfterRecords > 0, At > 0
	// or AtPoint != "".
	Worker       int
	AfterRecords int64
	// AfterPoint, if set, holds a worker kill back until the named point
	// has been reached at least once, so that a crash lands after a step
	// of the protocol whatever the scheduling.
	AfterPoint string
	// AtPoint, for worker=W,at-point=NAME, kills worker W at its own
	// Occurrence-th arrival at NAME (or the coordinator's, at a point the
	// coordinator passes), counting only arrivals after AfterPoint.
	AtPoint string
	// At, for a worker kill given as worker=W,at=DURATION, kills worker W
	// at that wall-clock moment since the run started (at the first read
	// after it) instead of after a record count.
	At time.Duration
	// Named points: Point != "" and Occurrence >= 1 (also AtPoint's).
	Point      string
	Occurrence int
	// OnlyWorker (point=NAME,worker=W) fires the named point only as
	// worker Worker passes it, counting that worker's passes alone, so a
	// point every worker passes kills a chosen one, not whichever got
	// there first.
	OnlyWorker bool
	// KillProcess (kill=process, named points only) kills the whole
	// process at the point instead of the role that reaches it.
	KillProcess bool
}

// The run driver's points (package run), reached once by every executor's
// run after the executor has returned. There is no executor left to
// restart a role in process, so a crash there must kill the process
// (kill=process); --resume then continues the run.
const (
	// PointBeforeFinish: the executor has returned (a bounded input is
	// wholly processed, its last recovery point and commit are durable);
	// the sink's Finish has not run (idempotent: the store is not
	// exported) and the run record is not marked finished.
	PointBeforeFinish = "run.before-finish"
	// PointMidFinish: the sink's Finish is half done. Idempotent: the
	// export is written and synced under a temporary name, not yet
	// published. Append and transactional, whose Finish has nothing to
	// do, reach it just before their Finish.
	PointMidFinish = "run.mid-finish"
	// PointAfterFinish: the sink's Finish has completed (idempotent: the
	// export is visible); the run record is not marked finished.
	PointAfterFinish = "run.after-finish"
)

// RunPoints are the run driver's points, in the order a run reaches them.
// Every executor has them besides its own.
var RunPoints = []string{PointBeforeFinish, PointMidFinish, PointAfterFinish}

// ProcessOnly explains, for --list-fail-points and errors, why the run
// driver's points take kill=process only.
const ProcessOnly = "kill=process only: the executor has returned, so there is no role to restart in process"

// IsWorkerKill reports whether s is a worker kill rather than a named point.
func (s Spec) IsWorkerKill() bool { return s.Point == "" }

func (s Spec) String() string {
	if s.IsWorkerKill() {
		trigger := fmt.Sprintf("after-records=%d", s.AfterRecords)
		switch {
		case s.At > 0:
			trigger = "at=" + s.At.String()
		case s.AtPoint != "":
			trigger = fmt.Sprintf("at-point=%s,occurrence=%d", s.AtPoint, s.Occurrence)
		}
		if s.AfterPoint != "" {
			return fmt.Sprintf("worker=%d,%s,after-point=%s", s.Worker, trigger, s.AfterPoint)
		}
		return fmt.Sprintf("worker=%d,%s", s.Worker, trigger)
	}
	who := ""
	if s.OnlyWorker {
		who = fmt.Sprintf(",worker=%d", s.Worker)
	}
	if s.KillProcess {
		return fmt.Sprintf("point=%s%s,occurrence=%d,kill=process", s.Point, who, s.Occurrence)
	}
	return fmt.Sprintf("point=%s%s,occurrence=%d", s.Point, who, s.Occurrence)
}

const usage = "allowed: worker=W,after-records=N|at=DURATION|at-point=NAME[,occurrence=K][,after-point=NAME] or point=NAME[,worker=W][,occurrence=K][,kill=process]"

// Parse parses one --fail value.
func Parse(text string) (Spec, error) {
	s := Spec{Worker: -1}
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && k != "" && v == "" {
			return Spec{}, fmt.Errorf("invalid --fail %q: %s= has no value (%s)", text, k, usage)
		}
		if !ok || v == "" {
			return Spec{}, fmt.Errorf("invalid --fail %q: %q is not key=value (%s)", text, part, usage)
		}
		if seen[k] {
			return Spec{}, fmt.Errorf("invalid --fail %q: %s given twice", text, k)
		}
		seen[k] = true
		switch k {
		case "worker", "after-records", "occurrence":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 || (k != "worker" && n == 0) {
				return Spec{}, fmt.Errorf("invalid --fail %q: %s must be a whole number%s, got %q", text, k, map[bool]string{true: " ≥ 0", false: " ≥ 1"}[k == "worker"], v)
			}
			switch k {
			case "worker":
				s.Worker = int(n)
			case "after-records":
				s.AfterRecords = n
			default:
				s.Occurrence = int(n)
			}
		case "at":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return Spec{}, fmt.Errorf("invalid --fail %q: at must be a duration > 0 such as 4.5s, got %q", text, v)
			}
			s.At = d
		case "point":
			s.Point = v
		case "after-point":
			s.AfterPoint = v
		case "at-point":
			s.AtPoint = v
		case "kill":
			if v != "process" {
				return Spec{}, fmt.Errorf("invalid --fail %q: kill must be process, got %q (%s)", text, v, usage)
			}
			s.KillProcess = true
		default:
			return Spec{}, fmt.Errorf("invalid --fail %q: unknown key %q (%s)", text, k, usage)
		}
	}
	switch {
	case s.Point != "" && (seen["after-records"] || seen["after-point"] || seen["at"] || seen["at-point"]):
		return Spec{}, fmt.Errorf("invalid --fail %q: point= cannot be combined with after-records=, at=, at-point= or after-point= (%s)", text, usage)
	case s.Point != "" && seen["worker"] && seen["kill"]:
		return Spec{}, fmt.Errorf("invalid --fail %q: kill=process kills the process, whichever worker passes the point; drop worker= (%s)", text, usage)
	case s.Point != "":
		if s.Occurrence == 0 {
			s.Occurrence = 1
		}
		s.OnlyWorker = seen["worker"]
	case seen["occurrence"] && !seen["at-point"]:
		return Spec{}, fmt.Errorf("invalid --fail %q: occurrence= goes with point= or at-point= (%s)", text, usage)
	case seen["kill"]:
		return Spec{}, fmt.Errorf("invalid --fail %q: kill=process goes with point=; a worker kill kills one worker, not the process (%s)", text, usage)
	case btoi(seen["at"])+btoi(seen["after-records"])+btoi(seen["at-point"]) > 1:
		var given []string
		for _, k := range []string{"at", "after-records", "at-point"} {
			if seen[k] {
				given = append(given, k+"=")
			}
		}
		return Spec{}, fmt.Errorf("invalid --fail %q: %s are %s triggers; give one (%s)", text, strings.Join(given, " and "), map[int]string{2: "two", 3: "three"}[len(given)], usage)
	case !seen["worker"] || !(seen["after-records"] || seen["at"] || seen["at-point"]):
		return Spec{}, fmt.Errorf("invalid --fail %q: a worker kill needs both worker= and a trigger, after-records=, at= or at-point= (%s)", text, usage)
	case s.AtPoint != "" && s.AtPoint == s.AfterPoint:
		return Spec{}, fmt.Errorf("invalid --fail %q: at-point= and after-point= name the same point; drop after-point= or use occurrence= (%s)", text, usage)
	case s.AtPoint != "" && s.Occurrence == 0:
		s.Occurrence = 1
	}
	return s, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Validate checks named points against the points an executor has and
// worker indexes against its worker count.
func Validate(specs []Spec, points []string, workers int) error {
	for _, s := range specs {
		name := s.Point
		if s.IsWorkerKill() {
			if s.At < 0 || btoi(s.At > 0)+btoi(s.AfterRecords > 0)+btoi(s.AtPoint != "") != 1 || s.AfterRecords < 0 {
				return fmt.Errorf("invalid --fail %s: a worker kill needs exactly one of at > 0, after-records > 0 and at-point", s)
			}
			if s.AtPoint != "" && s.Occurrence < 1 {
				return fmt.Errorf("invalid --fail %s: occurrence must be 1 or more", s)
			}
			if s.Worker < 0 || s.Worker >= workers {
				return fmt.Errorf("invalid --fail %s: worker %d does not exist (workers are 0..%d)", s, s.Worker, workers-1)
			}
			if err := validateAtPoint(s, points); err != nil {
				return err
			}
			if name = s.AfterPoint; name == "" {
				continue
			}
		}
		if s.OnlyWorker && (s.Worker < 0 || s.Worker >= workers) {
			return fmt.Errorf("invalid --fail %s: worker %d does not exist (workers are 0..%d)", s, s.Worker, workers-1)
		}
		if slices.Contains(RunPoints, name) {
			if s.IsWorkerKill() {
				return fmt.Errorf("invalid --fail %s: after-point %s comes after the executor has returned, when no worker is left to kill", s, name)
			}
			if !s.KillProcess {
				return fmt.Errorf("invalid --fail %s: point %s takes %s; add kill=process", s, name, ProcessOnly)
			}
			if s.Occurrence != 1 {
				return fmt.Errorf("invalid --fail %s: point %s is reached once per run, so occurrence must be 1", s, name)
			}
			continue
		}
		if !slices.Contains(points, name) {
			return fmt.Errorf("invalid --fail %s: unknown point %q (list them with --list-fail-points)", s, name)
		}
	}
	return nil
}

// validateAtPoint checks a worker kill's at-point (if any) the way
// Validate checks a named point.
func validateAtPoint(s Spec, points []string) error {
	switch {
	case s.AtPoint == "":
		return nil
	case slices.Contains(RunPoints, s.AtPoint):
		return fmt.Errorf("invalid --fail %s: at-point %s comes after the executor has returned, when no worker is left to kill", s, s.AtPoint)
	case !slices.Contains(points, s.AtPoint):
		return fmt.Errorf("invalid --fail %s: unknown point %q (list them with --list-fail-points)", s, s.AtPoint)
	}
	return nil
}

// Crash is the error an Injector returns when a fault fires. Executors treat
// it as the death of the worker or role named in it, never as a job error.
type Crash struct {
	Spec Spec
	// Worker is the worker that dies (for named points: the caller's).
	Worker int
}

func (c *Crash) Error() string { return "injected crash: " + c.Spec.String() }

// AsCrash returns the Crash inside err, if any.
func AsCrash(err error) (*Crash, bool) {
	var c *Crash
	ok := errors.As(err, &c)
	return c, ok
}

// Injector decides when faults fire.
type Injector struct {
	// KillProcess carries out a kill=process fault: it kills the process
	// at once, as SIGKILL does, and does not return. The command sets it;
	// when it is nil (a command or test that cannot lose its process) such
	// a fault fails the run with an error instead.
	KillProcess func(Spec)

	mu     sync.Mutex
	specs  []Spec
	fired  []bool
	hits   []int // arrivals counted towards each at-point kill
	counts map[string]int
	read   int64
	start  time.Time
	now    func() time.Time
	Fired  []Spec // in firing order, for the summary
}

// NewInjector arms specs. Timed kills (at=) count from the moment
// NewInjector runs unless Start sets the run's own start.
func NewInjector(specs []Spec) *Injector {
	return &Injector{specs: specs, fired: make([]bool, len(specs)), hits: make([]int, len(specs)), counts: map[string]int{}, start: time.Now(), now: time.Now}
}

// Start sets the moment timed kills count from (the run's start) and the
// clock they read; now == nil keeps the wall clock. Tests pass a fake
// clock so that a timed kill fires without waiting.
func (in *Injector) Start(start time.Time, now func() time.Time) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.start = start
	if now != nil {
		in.now = now
	}
}

// Coordinator is the worker number a coordinator (or the run driver)
// passes to Point: a crash there kills the coordinator, not a worker.
const Coordinator = -1

// Point is called by worker (or Coordinator) each time it reaches the
// named point; it returns a *Crash when a fault fires there. The Crash's
// Worker is the caller's for a named point; a worker kill that fires at
// the point (at-point, or after-point once its records are read) names
// its own worker, which may be another one: the caller carries that
// worker's death out and goes on. A kill=process fault does not return:
// it kills the process (KillProcess); without that hook it returns a
// plain error, which fails the run.
//
// Every executor passes the result on as an error, the way it passes on
// any other failure of the step that reached the point: the Crash is a
// value its caller returns (or, in an event loop, records), and the
// executor's error path carries it out. Nothing is carried out here.
func (in *Injector) Point(name string, worker int) error {
	if in == nil {
		return nil
	}
	s, ok := in.reach(name, worker)
	switch {
	case !ok:
		return nil
	case s.IsWorkerKill():
		return &Crash{Spec: s, Worker: s.Worker}
	case !s.KillProcess:
		return &Crash{Spec: s, Worker: worker}
	case in.KillProcess == nil:
		return fmt.Errorf("--fail %s: this command cannot kill its own process", s)
	}
	in.KillProcess(s)
	return fmt.Errorf("--fail %s: the process survived its kill", s)
}

// reach counts one reach of point name and returns the fault that fires
// there, if any.
func (in *Injector) reach(name string, worker int) (Spec, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.counts[name]++
	byWorker := fmt.Sprintf("%s\x00%d", name, worker)
	in.counts[byWorker]++
	for i, s := range in.specs {
		if in.fired[i] {
			continue
		}
		if s.IsWorkerKill() {
			if in.killsAt(i, name, worker) {
				in.fired[i] = true
				in.Fired = append(in.Fired, s)
				return s, true
			}
			continue
		}
		n := in.counts[name]
		if s.OnlyWorker {
			if s.Worker != worker {
				continue
			}
			n = in.counts[byWorker]
		}
		if !in.fired[i] && s.Point == name && s.Occurrence == n {
			in.fired[i] = true
			in.Fired = append(in.Fired, s)
			return s, true
		}
	}
	return Spec{}, false
}

// killsAt reports whether worker kill i fires at this arrival of worker at
// point name (already counted): its at-point's arrival, or its after-point
// reached once its records (or time) are already due. The caller holds mu.
func (in *Injector) killsAt(i int, name string, worker int) bool {
	s := in.specs[i]
	if s.AtPoint == "" {
		return s.AfterPoint == name && in.due(s, in.read, 0)
	}
	if s.AtPoint != name || (worker != s.Worker && worker != Coordinator) || (s.AfterPoint != "" && in.counts[s.AfterPoint] == 0) {
		return false
	}
	in.hits[i]++
	return in.hits[i] == s.Occurrence
}

// due reports whether the trigger of worker kill s (records or time) is
// met with read records read; elapsed is the time since the start, or 0
// to have due read the clock. An at-point kill is never due by count or
// time. The caller holds mu.
func (in *Injector) due(s Spec, read int64, elapsed time.Duration) bool {
	switch {
	case s.AtPoint != "":
		return false
	case s.At > 0:
		if elapsed == 0 {
			elapsed = in.now().Sub(in.start)
		}
		return elapsed >= s.At
	}
	return read >= s.AfterRecords
}

// Read adds n records to the count of records read; it returns a *Crash for
// the first armed worker kill whose threshold is reached, record count or
// time since the start (and whose after-point, if any, has been reached).
// A timed kill is checked here, not by a timer, so it lands at a read like
// any other worker kill. An at-point kill fires in Point only.
func (in *Injector) Read(n int64) error {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.read += n
	var elapsed time.Duration
	for i, s := range in.specs {
		if s.At > 0 && elapsed == 0 {
			elapsed = in.now().Sub(in.start)
		}
		if !in.fired[i] && s.IsWorkerKill() && in.due(s, in.read, elapsed) && (s.AfterPoint == "" || in.counts[s.AfterPoint] > 0) {
			in.fired[i] = true
			in.Fired = append(in.Fired, s)
			return &Crash{Spec: s, Worker: s.Worker}
		}
	}
	return nil
}

// RecordsRead returns the records read so far, replays included (what
// worker kills count).
func (in *Injector) RecordsRead() int64 {
	if in == nil {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.read
}

// Pending returns the faults that have not fired.
func (in *Injector) Pending() []Spec {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Spec
	for i, s := range in.specs {
		if !in.fired[i] {
			out = append(out, s)
		}
	}
	return out
}
