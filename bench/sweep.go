package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The settings --sweep can vary, as written before the "=".
const (
	// SweepCadence varies the time between recovery points (recordwise:
	// checkpoint interval; microbatch: trigger; diskphase: finite-job
	// interval), applied to every contestant through run.Options.
	SweepCadence = "checkpoint-interval"
	// SweepLoad varies the offered rate as a fraction of each
	// contestant's own measured capacity (see Calibrate).
	SweepLoad = "load"
	// SweepParallelism varies the subtasks per stage: with one worker
	// killed, the survivors are parallelism − 1.
	SweepParallelism = "parallelism"
)

// sweepNames are the settings in the order the errors list them.
var sweepNames = []string{SweepCadence, SweepLoad, SweepParallelism}

// maxSweepPoints bounds a sweep: every point is a run per contestant and
// repeat, so a long list is more likely a typo than a plan.
const maxSweepPoints = 16

// ParseSweep reads a --sweep value, NAME=V1,V2,…:
//
//	checkpoint-interval=100ms,500ms,1s,5s  (durations, > 0)
//	load=50%,80%,95%                       (percent of capacity, 0 < L < 100)
//	parallelism=2,4,8                      (1..128)
//
// Points keep the order written; a value given twice is refused. Every
// error is one line starting "invalid --sweep", a usage error.
func ParseSweep(s string) (name string, pts []SweepPoint, err error) {
	name, list, ok := strings.Cut(strings.TrimSpace(s), "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return "", nil, fmt.Errorf("invalid --sweep %q: write NAME=V1,V2,… with NAME one of %s", s, strings.Join(sweepNames, ", "))
	}
	var parse func(v string) (SweepPoint, error)
	switch name {
	case SweepCadence:
		parse = parseCadencePoint
	case SweepLoad:
		parse = parseLoadPoint
	case SweepParallelism:
		parse = parseParallelismPoint
	default:
		return "", nil, fmt.Errorf("invalid --sweep %q: unknown setting %q (allowed: %s)", s, name, strings.Join(sweepNames, ", "))
	}
	values := strings.Split(list, ",")
	if len(values) > maxSweepPoints {
		return "", nil, fmt.Errorf("invalid --sweep %q: %d values, at most %d", s, len(values), maxSweepPoints)
	}
	seen := map[SweepPoint]string{}
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			return "", nil, fmt.Errorf("invalid --sweep %q: an empty value", s)
		}
		pt, err := parse(v)
		if err != nil {
			return "", nil, fmt.Errorf("invalid --sweep %q: %v", s, err)
		}
		pt.Label = v
		key := pt
		key.Label = ""
		if first, dup := seen[key]; dup {
			return "", nil, fmt.Errorf("invalid --sweep %q: %s and %s are the same value", s, first, v)
		}
		seen[key] = v
		pts = append(pts, pt)
	}
	return name, pts, nil
}

func parseCadencePoint(v string) (SweepPoint, error) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return SweepPoint{}, fmt.Errorf("%q is not a duration (write 100ms, 1s, …)", v)
	case d < time.Millisecond:
		return SweepPoint{}, fmt.Errorf("interval %s: must be at least 1ms", v)
	case d > time.Hour:
		return SweepPoint{}, fmt.Errorf("interval %s: must be at most 1h", v)
	}
	return SweepPoint{Cadence: d}, nil
}

func parseLoadPoint(v string) (SweepPoint, error) {
	num, ok := strings.CutSuffix(v, "%")
	if !ok {
		return SweepPoint{}, fmt.Errorf("load %q: write a percentage of capacity, like 80%%", v)
	}
	pct, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	switch {
	case err != nil:
		return SweepPoint{}, fmt.Errorf("load %q is not a number followed by %%", v)
	case !(pct > 0 && pct < 100): // also refuses NaN
		// At or above 100 % a contestant never catches up: there is no
		// catch-up time to measure.
		return SweepPoint{}, fmt.Errorf("load %s: must be above 0%% and below 100%% of capacity", v)
	}
	return SweepPoint{Load: pct / 100}, nil
}

func parseParallelismPoint(v string) (SweepPoint, error) {
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return SweepPoint{}, fmt.Errorf("parallelism %q is not a whole number", v)
	case n < 1 || n > 128:
		return SweepPoint{}, fmt.Errorf("parallelism %d: allowed is 1..128 (keyed state has 128 key groups)", n)
	}
	return SweepPoint{Parallelism: n}, nil
}
