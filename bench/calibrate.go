package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CalibrationRecords is how many records a calibration run reads (over all
// inputs): enough for a second or more of work on a small machine, so
// start-up and the final flush weigh little in records / wall.
const CalibrationRecords = 1_000_000

// calibrationRecords is CalibrationRecords but in tests, which keep runs
// small.
var calibrationRecords int64 = CalibrationRecords

// Calibrate measures each contestant's capacity: a short run of the
// scenario's input without its pace and without a fault, whose records
// read over its wall time are the most the contestant can take. A load
// sweep offers each contestant fractions of its own capacity. The inputs
// are p.Config.Inputs (the live inputs of the scenario), their gen: specs
// read unpaced and cut to CalibrationRecords; any other kind of input is
// refused, as it cannot be read faster than it comes. A progress line per
// contestant reports the figure. A failed calibration run fails the
// calibration: without a capacity a load point means nothing.
func Calibrate(ctx context.Context, p Plan, contestants []Contestant) ([]Capacity, error) {
	inputs, err := calibrationInputs(p.Config.Inputs, calibrationRecords)
	if err != nil {
		return nil, err
	}
	out := make([]Capacity, 0, len(contestants))
	for i, c := range contestants {
		cfg := p.Config
		cfg.Executor, cfg.Options, cfg.Fails, cfg.Inputs = c.Executor, p.optionsOf(c), nil, inputs
		name := "calibrate-" + strings.ReplaceAll(c.Name(), "/", "-")
		cfg.Output, cfg.Storage = filepath.Join(p.Scratch, name, "out"), p.storageFor(name)
		s, _, err := p.runOnce(ctx, cfg, true)
		if err != nil {
			return nil, fmt.Errorf("calibrating %s: %w", c.Name(), err)
		}
		capa, err := capacityOf(c.Name(), s.RecordsIn, s.WallMs)
		if err != nil {
			return nil, err
		}
		if p.Progress != nil {
			fmt.Fprintf(p.Progress, "bench: calibration [%d/%d] %s: %.0f records/s (%d records unpaced in %.0f ms)\n",
				i+1, len(contestants), c.Name(), capa.RPS, s.RecordsIn, s.WallMs)
		}
		out = append(out, capa)
	}
	return out, nil
}

// capacityOf is records read over wall time, refused when nothing was
// measured (an empty input, a run too short to time).
func capacityOf(contestant string, records int64, wallMs float64) (Capacity, error) {
	if records <= 0 || !(wallMs > 0) {
		return Capacity{}, fmt.Errorf("calibrating %s: %d records in %.3f ms is no measure of capacity", contestant, records, wallMs)
	}
	return Capacity{Contestant: contestant, RPS: float64(records) / (wallMs / 1000), WallMs: wallMs}, nil
}

// Capacities are caps by contestant name, the form a load point looks a
// contestant's capacity up in (Plan.Capacity).
func Capacities(caps []Capacity) map[string]float64 {
	out := make(map[string]float64, len(caps))
	for _, c := range caps {
		out[c.Contestant] = c.RPS
	}
	return out
}

// calibrationInputs are ins read as fast as possible: every gen: spec
// without its rate=, its records= set so that the inputs together hold
// total records, shared in proportion to their own sizes (the join's two
// inputs keep their ratio).
func calibrationInputs(ins map[string]string, total int64) (map[string]string, error) {
	if len(ins) == 0 {
		return nil, fmt.Errorf("calibration needs the scenario's inputs; none were given")
	}
	names := slices.Sorted(maps.Keys(ins))
	sizes := make([]int64, len(names))
	var sum int64
	for i, n := range names {
		body, ok := strings.CutPrefix(ins[n], "gen:")
		if !ok {
			return nil, fmt.Errorf("calibration reads generated input only: input %s is %q, which cannot be read faster than it comes", n, ins[n])
		}
		sizes[i] = 1 // an input without records= shares equally
		for _, kv := range strings.Split(body, ",") {
			if v, ok := strings.CutPrefix(kv, "records="); ok {
				if r, err := strconv.ParseFloat(v, 64); err == nil && r >= 1 {
					sizes[i] = int64(r)
				}
			}
		}
		sum += sizes[i]
	}
	out := make(map[string]string, len(names))
	for i, n := range names {
		records := max(int64(float64(total)*float64(sizes[i])/float64(sum)), 1)
		keep := []string{"records=" + strconv.FormatInt(records, 10)}
		for _, kv := range strings.Split(strings.TrimPrefix(ins[n], "gen:"), ",") {
			if kv != "" && !strings.HasPrefix(kv, "rate=") && !strings.HasPrefix(kv, "records=") {
				keep = append(keep, kv)
			}
		}
		out[n] = "gen:" + strings.Join(keep, ",")
	}
	return out, nil
}
