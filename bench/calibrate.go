package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CalibrationTime is how long a calibration run reads: long enough that
// start-up and the final flush weigh little (a run of a fraction of a
// second was measured at a third of recordwise's capacity), short enough
// for a sweep's preamble.
const CalibrationTime = 2 * time.Second

// calibrationTime is CalibrationTime but in tests, which keep runs short.
var calibrationTime = CalibrationTime

// Calibrate measures each contestant's capacity: a run of the scenario's
// input without its pace, without an end and without a fault, stopped
// after CalibrationTime; the records it read over its wall time are the
// most the contestant can take. A load sweep offers each contestant
// fractions of its own capacity. The inputs are p.Config.Inputs (the live
// inputs of the scenario), their gen: specs read unpaced and endless; any
// other kind of input is refused, as it cannot be read faster than it
// comes. A progress line per contestant reports the figure. A failed
// calibration run fails the calibration: without a capacity a load point
// means nothing.
func Calibrate(ctx context.Context, p Plan, contestants []Contestant) ([]Capacity, error) {
	live := p.Config.Inputs
	if p.Rate > 0 && p.Duration > 0 {
		live = p.inputs(p.Rate, p.Config.Parallelism)
	}
	inputs, err := calibrationInputs(live)
	if err != nil {
		return nil, err
	}
	out := make([]Capacity, 0, len(contestants))
	for i, c := range contestants {
		cfg := p.Config
		opts := p.optionsOf(c)
		if opts != nil && p.Cadence > 0 {
			opts = opts.WithCadence(p.Cadence)
		}
		cfg.Executor, cfg.Options, cfg.Fails, cfg.Inputs = c.Executor, opts, nil, inputs
		name := "calibrate-" + strings.ReplaceAll(c.Name(), "/", "-")
		cfg.Output, cfg.Storage = filepath.Join(p.Scratch, name, "out"), p.storageFor(name)
		// The run ends when its time is up: the executor stops reading and
		// the summary counts what it did until then.
		cctx, cancel := context.WithTimeout(ctx, calibrationTime)
		s, _, err := p.runOnce(cctx, cfg, true)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("calibrating %s: %w", c.Name(), err)
		}
		capa, err := capacityOf(c.Name(), s.RecordsIn, s.WallMs)
		if err != nil {
			return nil, err
		}
		if p.Progress != nil {
			fmt.Fprintf(p.Progress, "bench: calibration [%d/%d] %s: %.0f records/s (%d records read unpaced in %.0f ms)\n",
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

// calibrationInputs are ins read as fast as possible and without end:
// every gen: spec with records=0 and without its rate=, the rest kept
// (keys, partitions, seed: the same shape of input).
func calibrationInputs(ins map[string]string) (map[string]string, error) {
	if len(ins) == 0 {
		return nil, fmt.Errorf("calibration needs the scenario's inputs; none were given")
	}
	out := make(map[string]string, len(ins))
	for _, n := range slices.Sorted(maps.Keys(ins)) {
		body, ok := strings.CutPrefix(ins[n], "gen:")
		if !ok {
			return nil, fmt.Errorf("calibration reads generated input only: input %s is %q, which cannot be read faster than it comes", n, ins[n])
		}
		keep := []string{"records=0"}
		for _, kv := range strings.Split(body, ",") {
			if kv != "" && !strings.HasPrefix(kv, "rate=") && !strings.HasPrefix(kv, "records=") {
				keep = append(keep, kv)
			}
		}
		out[n] = "gen:" + strings.Join(keep, ",")
	}
	return out, nil
}
