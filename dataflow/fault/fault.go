// Package fault turns --fail flags into crashes at exact, replayable places.
//
// Two kinds of fault exist:
//   - worker=W,after-records=N kills worker W once the job has read N input
//     records (counted over all sources, from the start of the run); with
//     after-point=NAME added, it waits until the named point has also been
//     reached once (for example, until the first checkpoint is durable);
//   - point=NAME[,occurrence=K] crashes the process role that reaches the
//     named point for the K-th time (default 1). Each executor lists the
//     points it has (rewind run --executor E --list-fail-points).
//
// Every fault fires once. The Injector is a plain value guarded by a mutex:
// it decides, the executor carries the crash out (drops the worker's memory,
// buffers and local files, or restarts its coordinator).
package fault

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Spec is one parsed --fail value.
type Spec struct {
	// Worker kills: Worker >= 0 and AfterRecords > 0.
	Worker       int
	AfterRecords int64
	// AfterPoint, if set, holds a worker kill back until the named point
	// has been reached at least once, so that a crash lands after a step
	// of the protocol whatever the scheduling.
	AfterPoint string
	// Named points: Point != "" and Occurrence >= 1.
	Point      string
	Occurrence int
}

// IsWorkerKill reports whether s is a worker kill rather than a named point.
func (s Spec) IsWorkerKill() bool { return s.Point == "" }

func (s Spec) String() string {
	if s.IsWorkerKill() {
		if s.AfterPoint != "" {
			return fmt.Sprintf("worker=%d,after-records=%d,after-point=%s", s.Worker, s.AfterRecords, s.AfterPoint)
		}
		return fmt.Sprintf("worker=%d,after-records=%d", s.Worker, s.AfterRecords)
	}
	return fmt.Sprintf("point=%s,occurrence=%d", s.Point, s.Occurrence)
}

const usage = "allowed: worker=W,after-records=N[,after-point=NAME] or point=NAME[,occurrence=K]"

// Parse parses one --fail value.
func Parse(text string) (Spec, error) {
	s := Spec{Worker: -1}
	seen := map[string]bool{}
	for _, part := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
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
		case "point":
			s.Point = v
		case "after-point":
			s.AfterPoint = v
		default:
			return Spec{}, fmt.Errorf("invalid --fail %q: unknown key %q (%s)", text, k, usage)
		}
	}
	switch {
	case s.Point != "" && (seen["worker"] || seen["after-records"] || seen["after-point"]):
		return Spec{}, fmt.Errorf("invalid --fail %q: point= cannot be combined with worker=, after-records= or after-point= (%s)", text, usage)
	case s.Point != "":
		if s.Occurrence == 0 {
			s.Occurrence = 1
		}
	case seen["occurrence"]:
		return Spec{}, fmt.Errorf("invalid --fail %q: occurrence= goes with point= (%s)", text, usage)
	case !seen["worker"] || !seen["after-records"]:
		return Spec{}, fmt.Errorf("invalid --fail %q: a worker kill needs both worker= and after-records= (%s)", text, usage)
	}
	return s, nil
}

// Validate checks named points against the points an executor has and
// worker indexes against its worker count.
func Validate(specs []Spec, points []string, workers int) error {
	for _, s := range specs {
		name := s.Point
		if s.IsWorkerKill() {
			if s.Worker >= workers {
				return fmt.Errorf("invalid --fail %s: worker %d does not exist (workers are 0..%d)", s, s.Worker, workers-1)
			}
			if name = s.AfterPoint; name == "" {
				continue
			}
		}
		if !slices.Contains(points, name) {
			return fmt.Errorf("invalid --fail %s: unknown point %q (list them with --list-fail-points)", s, name)
		}
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
	mu     sync.Mutex
	specs  []Spec
	fired  []bool
	counts map[string]int
	read   int64
	Fired  []Spec // in firing order, for the summary
}

// NewInjector arms specs.
func NewInjector(specs []Spec) *Injector {
	return &Injector{specs: specs, fired: make([]bool, len(specs)), counts: map[string]int{}}
}

// Point is called by worker (or -1 for the coordinator) each time it reaches
// the named point; it returns a *Crash when a fault fires there.
func (in *Injector) Point(name string, worker int) error {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.counts[name]++
	for i, s := range in.specs {
		if !in.fired[i] && s.Point == name && s.Occurrence == in.counts[name] {
			in.fired[i] = true
			in.Fired = append(in.Fired, s)
			return &Crash{Spec: s, Worker: worker}
		}
	}
	return nil
}

// Read adds n records to the count of records read; it returns a *Crash for
// the first armed worker kill whose threshold is reached (and whose
// after-point, if any, has been reached).
func (in *Injector) Read(n int64) error {
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.read += n
	for i, s := range in.specs {
		if !in.fired[i] && s.IsWorkerKill() && in.read >= s.AfterRecords && (s.AfterPoint == "" || in.counts[s.AfterPoint] > 0) {
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
