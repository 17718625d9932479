package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

func init() {
	addLesson(lesson{
		name:  mistake.StopTheWorld,
		brief: "right result, but nothing moves while every task saves",
		why: "Stopping every source, draining the channels and saving every task gives a " +
			"consistent cut, so the result is right. But the whole job waits for the slowest " +
			"part to be durable at every recovery point; a marker travels with the records " +
			"instead, and the sources never stop.",
		teach: teachStopTheWorld,
	})
}

// teachStopTheWorld runs the job with one crash twice: stopping the world
// at each recovery point (aligned barriers behind stopped sources) and
// with markers as usual. Both equal the reference. The executor logs, per
// point, the stretch from every part saved to the sources resuming; the
// lesson predicts that no record moves on any channel then, and finds the
// quiet stretch around it in the run's diagram (the gap between the
// batches either side), which must be at least as long.
func teachStopTheWorld(c *classroom) (*verdict, error) {
	exec, err := c.executorFor(mistake.StopTheWorld)
	if err != nil {
		return nil, err
	}
	rcfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	rcfg.Inputs = c.busyInputs(rcfg)
	ref, err := c.reference(rcfg)
	if err != nil {
		return nil, err
	}
	fails, err := c.crash(exec, rcfg, ref)
	if err != nil {
		return nil, err
	}
	rcfg.Fails = fails
	right, err := c.run(exec, rcfg, nil)
	if err != nil {
		return nil, err
	}
	// Stopped sources and aligned barriers: the barrier drains each
	// channel and overtakes nothing.
	barriers := c.f.barriers
	c.f.barriers = "aligned"
	wcfg, err := c.config(exec)
	c.f.barriers = barriers
	if err != nil {
		return nil, err
	}
	wcfg.Inputs, wcfg.Fails = rcfg.Inputs, fails
	wrong, err := c.run(exec, wcfg, &mistake.Plan{Name: mistake.StopTheWorld})
	if err != nil {
		return nil, err
	}

	moves := batchTimes(wrong)
	var points, predicted, observed []string
	quietEnough := len(wrong.steps) > 0
	for _, s := range wrong.steps {
		from, to := time.UnixMicro(s.From).Sub(wrong.start), time.UnixMicro(s.To).Sub(wrong.start)
		q := quietAround(moves, from, runEnd(wrong))
		points = append(points, fmt.Sprint(s.Point))
		predicted = append(predicted, msNum(to-from))
		observed = append(observed, msNum(q))
		if q < to-from {
			quietEnough = false
		}
	}
	var markerQuiet time.Duration
	rightMoves := batchTimes(right)
	for _, e := range right.rec.Events {
		// Points after the last batch (the final one) stop nothing.
		if e.Kind == spacetime.PointComplete && len(rightMoves) > 0 && e.T < rightMoves[len(rightMoves)-1] {
			markerQuiet = max(markerQuiet, quietAround(rightMoves, e.T, runEnd(right)))
		}
	}

	wrongEq := wrong.result.Diff(ref.result, 3) == ""
	rightEq := right.result.Diff(ref.result, 3) == ""
	v := &verdict{wrong: wrong, right: right,
		wrongGot: fmt.Sprintf("stop-the-world: %d rows %s, %d points stopped, wall %.0f ms",
			len(wrong.result.Rows), equalWord(wrongEq), len(wrong.steps), wrong.summary.WallMs),
		rightGot: fmt.Sprintf("markers (%s): %d rows %s, wall %.0f ms, quiet ≤ %s at a point",
			barriers, len(right.result.Rows), equalWord(rightEq), right.summary.WallMs, ms(markerQuiet)),
		predicted: fmt.Sprintf("no record moves for ≥ %s ms at points %s (all saved to resumed)",
			strings.Join(predicted, ", "), strings.Join(points, ", ")),
		observed: fmt.Sprintf("quiet for %s ms around them", strings.Join(observed, ", ")),
	}
	v.holds = wrongEq && rightEq && quietEnough
	return v, nil
}

// busyInputs is trace's input made busy (when --input gave none): the
// same 400 ms with 40 times the records, so that records move all the
// time and a pause stands out from the gaps between them.
func (c *classroom) busyInputs(cfg run.Config) map[string]string {
	if len(c.f.inputs) > 0 {
		return cfg.Inputs
	}
	if cfg.Job == "join" {
		return map[string]string{
			job.InputOrders:   fmt.Sprintf("gen:records=1200,keys=4,partitions=2,rate=3000,seed=%d", cfg.Seed),
			job.InputPayments: fmt.Sprintf("gen:records=1200,keys=4,partitions=2,rate=3000,seed=%d", cfg.Seed+1),
		}
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=2400,keys=4,partitions=2,rate=6000,seed=%d", cfg.Seed)}
}

// batchTimes are when records moved on a channel, in order.
func batchTimes(t *traced) []time.Duration {
	var out []time.Duration
	for _, e := range t.rec.Events {
		if e.Kind == spacetime.Batch {
			out = append(out, e.T)
		}
	}
	slices.Sort(out)
	return out
}

// quietAround is the stretch without a batch that holds moment at: from
// the last batch before it (or the run's start) to the first after (or
// end, the run's end).
func quietAround(moves []time.Duration, at, end time.Duration) time.Duration {
	i, _ := slices.BinarySearch(moves, at)
	var before time.Duration
	after := end
	if i > 0 {
		before = moves[i-1]
	}
	if i < len(moves) {
		after = moves[i]
	}
	return max(after-before, 0)
}

// runEnd is when t's run ended, on its diagram's clock.
func runEnd(t *traced) time.Duration {
	end := time.Duration(t.summary.WallMs * float64(time.Millisecond))
	for _, e := range t.rec.Events {
		end = max(end, e.T)
	}
	return end
}

// ms is d in milliseconds, one decimal.
func ms(d time.Duration) string { return msNum(d) + " ms" }

func msNum(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
