package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/bench"
)

// The --sweep flag of rewind bench: bench.go registers it with
// addSweepFlag, parses it with parseSweepFlag into the plan's Sweep and
// Points, and for a load sweep calibrates every contestant first.

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

// calibrate measures every contestant's capacity on the plan's live
// inputs, for a load sweep.
func calibrate(ctx context.Context, plan bench.Plan, contestants []bench.Contestant) ([]bench.Capacity, error) {
	caps, err := bench.Calibrate(ctx, plan, contestants)
	if err != nil {
		return nil, fmt.Errorf("load sweep: %w", err)
	}
	return caps, nil
}
