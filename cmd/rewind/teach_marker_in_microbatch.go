package main

import (
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

func init() {
	addLesson(lesson{
		name:  mistake.MarkerInMicrobatch,
		brief: "a marker per micro-batch saves what the seam saves",
		why: "At a batch seam nothing is in flight: every stage has taken all of the batch, " +
			"so the state the seam saves is already a consistent cut. A marker behind the " +
			"batch's records reaches each stage at that same point, so its part is the seam's " +
			"part again: one more snapshot per stage and batch, and no new recovery point.",
		teach: teachMarkerInMicrobatch,
	})
}

// teachMarkerInMicrobatch runs the job with one crash twice, with a
// marker through every micro-batch and without. The executor logs, per
// batch and stateful stage subtask, how many key groups hold the same
// state at the marker as at the seam; the lesson predicts all of them
// (nothing is in flight at a seam) and that both results equal the
// reference. The cost is said, not judged: one loaded run is no timing.
func teachMarkerInMicrobatch(c *classroom) (*verdict, error) {
	exec, err := c.executorFor(mistake.MarkerInMicrobatch)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	ref, err := c.reference(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Fails, err = c.crash(exec, cfg, ref); err != nil {
		return nil, err
	}
	right, err := c.run(exec, cfg, nil)
	if err != nil {
		return nil, err
	}
	wcfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	wcfg.Fails = cfg.Fails
	wrong, err := c.run(exec, wcfg, &mistake.Plan{Name: mistake.MarkerInMicrobatch})
	if err != nil {
		return nil, err
	}

	var groups, same int64
	batches := map[int64]bool{}
	for _, s := range wrong.steps {
		groups += s.To
		same += s.From
		batches[s.Point] = true
	}
	markers := count(wrong, spacetime.Marker)
	wrongEq := wrong.result.Diff(ref.result, 3) == ""
	rightEq := right.result.Diff(ref.result, 3) == ""
	v := &verdict{wrong: wrong, right: right,
		wrongGot: fmt.Sprintf("with markers: %d rows %s, %d batches committed, %d markers, %d parts compared, wall %.0f ms",
			len(wrong.result.Rows), equalWord(wrongEq), count(wrong, spacetime.Commit), markers, len(wrong.steps), wrong.summary.WallMs),
		rightGot: fmt.Sprintf("seams only: %d rows %s, %d batches committed, wall %.0f ms",
			len(right.result.Rows), equalWord(rightEq), count(right, spacetime.Commit), right.summary.WallMs),
		predicted: fmt.Sprintf("the marker's parts = the seam's: %d key groups of %d parts, in %d batches",
			groups, len(wrong.steps), len(batches)),
		observed: fmt.Sprintf("%d of %d key groups the same, %d differ", same, groups, groups-same),
	}
	v.holds = wrongEq && rightEq && markers > 0 && len(wrong.steps) > 0 && groups > 0 && same == groups
	return v, nil
}

// count is how many events of kind the run recorded.
func count(t *traced, kind string) int {
	n := 0
	for _, e := range t.rec.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}
