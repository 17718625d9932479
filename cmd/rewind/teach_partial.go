package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// partialCrashPoint is where the partial-point lesson crashes: worker 1
// dies at its first part written after the first checkpoint is durable
// (partialAfterPoint), as that part has become durable, before the
// acknowledgement. That checkpoint gets no metadata; one part of it is
// durable, and worker 1's other part, which it had not written yet, never
// will be. Counting worker 1's parts from the start of the run instead (the
// third) put the crash in another checkpoint whenever a busy machine wrote
// fewer parts in the first one.
// partialTries bounds the runs made for one lesson. Worker 1 is killed
// once its first part of a newer checkpoint is durable, and the other
// worker's tasks sometimes finish theirs before the kill lands (1 run in
// 10, on a quiet machine too): then every part of that point is durable,
// the tasks' newest parts agree, and the run shows nothing, so it is made
// again.
const partialTries = 4

const (
	partialCrashPoint = "checkpoint.before-ack"
	partialAfterPoint = "checkpoint.after-metadata"
)

func init() {
	addLesson(lesson{
		name:  mistake.PartialPoint,
		brief: "each task restores its newest part: a mixed picture",
		why: "A checkpoint is a recovery point only once every part is durable, which is what the coordinator's metadata says. " +
			"Take each task's newest part instead and the tasks resume from different cuts: a count restored from the older one misses what its sources will not read again, one restored from the newer counts again what they do. " +
			"Only a whole point is one cut.",
		teach: (*classroom).partialLesson,
	})
}

// partialLesson: with each source partition resumed at its own task's
// restored cut and each key counted from its owner's restored cut, a key's
// records between the two count twice (the owner's cut is later) or never
// (earlier).
func (c *classroom) partialLesson() (*verdict, error) {
	n := mistake.PartialPoint
	type where struct {
		input string
		p     int
	}
	var (
		r      *cutRuns
		cuts   map[int64]map[where]int64
		resume map[where]mistake.Step
		owners map[int]mistake.Step
	)
	for try := 1; ; try++ {
		// Aligned: a part then holds exactly the records before its cut (no
		// in-flight data belonging to the channels of another part).
		var err error
		r, err = c.cutLesson(n, cutSetup{barriers: "aligned", crash: func(exec run.Executor, cfg run.Config) ([]fault.Spec, error) {
			for _, p := range []string{partialCrashPoint, partialAfterPoint} {
				if !slices.Contains(exec.FailPoints(), p) {
					return nil, fmt.Errorf("--teach %s: %s has no crash point %s", n, exec.Name(), p)
				}
			}
			return []fault.Spec{{Worker: min(1, exec.Workers(cfg)-1), AtPoint: partialCrashPoint, Occurrence: 1, AfterPoint: partialAfterPoint}}, nil
		}})
		if err != nil {
			return nil, err
		}
		cuts, resume, owners = map[int64]map[where]int64{}, map[where]mistake.Step{}, map[int]mistake.Step{}
		points := map[int64]bool{}
		for _, s := range r.plan.Steps() {
			switch {
			case s.Note == "cut":
				if cuts[s.Point] == nil {
					cuts[s.Point] = map[where]int64{}
				}
				cuts[s.Point][where{s.Input, s.Partition}] = s.To
			case s.Input != "":
				resume[where{s.Input, s.Partition}] = s
				points[s.Point] = true
			default:
				owners[s.Partition] = s
				points[s.Point] = true
			}
		}
		if len(points) >= 2 {
			break
		}
		if try == partialTries {
			return nil, fmt.Errorf("--teach %s: in %d runs every task restored the same point (the last: %v): the crash never left a part of a newer checkpoint durable beside a missing one", n, partialTries, slices.Sorted(maps.Keys(points)))
		}
		c.log.Info("every task restored the same point: running the lesson again", "try", try, "points", slices.Sorted(maps.Keys(points)))
	}
	pred := changes{}
	var story []string
	for _, w := range slices.SortedFunc(maps.Keys(resume), func(a, b where) int { return cmp.Or(strings.Compare(a.input, b.input), cmp.Compare(a.p, b.p)) }) {
		from := resume[w]
		story = append(story, fmt.Sprintf("p%d at %d (point %d)", w.p, from.To, from.Point))
		recs, err := c.records(r.wrong.cfg, w.input, w.p, 0, wholePartition)
		if err != nil {
			return nil, err
		}
		for sub, o := range owners {
			var cov int64
			if o.Point > 0 {
				at, ok := cuts[o.Point][w]
				if !ok {
					return nil, fmt.Errorf("--teach %s: the log has no cut of point %d for partition %d", n, o.Point, w.p)
				}
				cov = at
			}
			lo, hi, sign := from.To, cov, int64(1) // counted twice
			if cov < from.To {
				lo, hi, sign = cov, from.To, -1 // never counted
			}
			for _, rec := range recs {
				if rec.Offset >= lo && rec.Offset < hi && keygroup.Owner(keygroup.Of(rec.Key), r.wrong.cfg.Parallelism) == sub {
					pred.add(rec, sign)
				}
			}
		}
	}
	for _, sub := range slices.Sorted(maps.Keys(owners)) {
		story = append(story, fmt.Sprintf("%s point %d", owners[sub].Task, owners[sub].Point))
	}
	return r.cutVerdict(n, pred, "restored "+strings.Join(story, ", "))
}
