package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/bench"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// The --sweep flag of rewind bench. bench.go registers it with
// addSweepFlag and, once the plan is built, applies it:
//
//	sw, err := parseSweepFlag(f.sweep, <the workers --fail kills>)
//	…
//	plan.Sweep, plan.Points = sw.name, sw.points
//	if sw.name == bench.SweepLoad {
//		calCfg := plan.Config
//		calCfg.Inputs = <the scenario's live inputs at --rate>
//		caps, err := calibrate(ctx, plan, calCfg, contestants)
//		plan.Calibration, plan.Capacity = caps, bench.Capacities(caps)
//	}
//
// and after the run calls res.Predict() (a no-op but for a load sweep).

func addSweepFlag(fl *pflag.FlagSet, v *string) {
	fl.StringVar(v, "sweep", "", "run every contestant at each value of one setting: checkpoint-interval=100ms,500ms,1s,5s (the cadence of every contestant), load=50%,80%,95% (of each contestant's capacity, calibrated first by a short unpaced run), parallelism=2,4,8")
}

// sweep is a parsed --sweep (name empty: none).
type sweep struct {
	name   string
	points []bench.SweepPoint
}

// parseSweepFlag reads --sweep; a parallelism sweep must leave every
// killed worker in range at each point.
func parseSweepFlag(text string, killed []int) (sweep, error) {
	if text == "" {
		return sweep{}, nil
	}
	name, pts, err := bench.ParseSweep(text)
	if err != nil {
		return sweep{}, usageError{err}
	}
	for _, pt := range pts {
		for _, w := range killed {
			if pt.Parallelism > 0 && w >= pt.Parallelism {
				return sweep{}, usagef("invalid --sweep %q: --fail kills worker %d, which parallelism %d does not have", text, w, pt.Parallelism)
			}
		}
	}
	return sweep{name: name, points: pts}, nil
}

// calibrate measures every contestant's capacity on cfg (the plan's job
// with the scenario's live inputs), for a load sweep.
func calibrate(ctx context.Context, plan bench.Plan, cfg run.Config, contestants []bench.Contestant) ([]bench.Capacity, error) {
	plan.Config = cfg
	caps, err := bench.Calibrate(ctx, plan, contestants)
	if err != nil {
		return nil, fmt.Errorf("load sweep: %w", err)
	}
	return caps, nil
}
