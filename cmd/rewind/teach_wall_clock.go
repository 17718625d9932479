package main

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

func init() {
	addLesson(lesson{
		name:  mistake.WallClock,
		brief: "every task saves on its own clock, no marker",
		why: "Clocks on different machines never quite agree, and even at one instant records " +
			"are on the channels: they have left the sender's saved read position without reaching " +
			"the receiver's saved state, so a restore loses them, or counts them twice where the " +
			"sender saved first. A marker travels in the channels, so each task saves exactly " +
			"behind what its senders saved.",
		teach: teachWallClock,
	})
}

// wallClockJob is the job the lesson runs: a keyed count, where a lost or
// doubled record shows as its key's count and sum.
const wallClockJob = "keyed-count"

// wallClockTries bounds the wrong runs made for one lesson (see
// teachWallClock: only a cut without both kinds of in-flight record is
// made again). Since a held-back kill fires at the commit point itself
// once its records are read, close to half the wrong runs restore a cut
// with nothing counted twice (measured on a quiet machine: 3 tries failed
// the lesson in 3 of 36 runs), so it takes more tries than it did.
const wallClockTries = 6

// teachWallClock runs keyed-count with one crash twice: with every task
// saving on the coordinator's clock and with markers. The executor logs,
// for the cut each checkpoint took, the records in flight on each channel
// by id (lost or counted twice); the lesson predicts from those of the
// restored checkpoint and the input each key's count and sum, and compares
// with the wrong result.
func teachWallClock(c *classroom) (*verdict, error) {
	if c.fl.Changed("job") && c.f.job != wallClockJob {
		return nil, usagef("invalid --job %q for --teach %s: the lesson runs %s (a lost or doubled record shows in its key's count)", c.f.job, mistake.WallClock, wallClockJob)
	}
	c.f.job = wallClockJob
	exec, err := c.executorFor(mistake.WallClock)
	if err != nil {
		return nil, err
	}
	cfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	cfg.Inputs = c.wallClockInputs(cfg)
	ref, err := c.reference(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Fails, err = c.wallClockCrash(exec, cfg, ref); err != nil {
		return nil, err
	}
	right, err := c.run(exec, cfg, nil)
	if err != nil {
		return nil, err
	}
	// The kill is held back until the first cut has been committed; it
	// fires at the first read after that or, when half the input was read
	// before, at the commit point itself, so the wrong run crashes and
	// restores a committed cut however busy the machine: if it does not,
	// the lesson fails at once. That cut must show records both lost and
	// counted twice, which needs rows to move on the channels between the
	// mistake's phases of saving; on a busy machine a phase can find a
	// channel still (about 1 run in 10 at load 15), so that alone, and
	// nothing about the crash, makes a wrong run be made again, in fresh
	// directories, a bounded number of times.
	var wrong *traced
	restored := int64(-1)
	for try := 1; ; try++ {
		wcfg, err := c.config(exec)
		if err != nil {
			return nil, err
		}
		wcfg.Inputs, wcfg.Fails = cfg.Inputs, cfg.Fails
		if wrong, err = c.run(exec, wcfg, &mistake.Plan{Name: mistake.WallClock}); err != nil {
			return nil, err
		}
		restored = -1
		for _, e := range wrong.rec.Events {
			if e.Kind == spacetime.Restore && e.ID > 0 {
				restored = e.ID
			}
		}
		if wrong.summary.Crashes != 1 || len(wrong.summary.UnfiredFaults) > 0 || restored <= 0 {
			return nil, fmt.Errorf("--teach %s: the wrong run crashed %d times (unfired: %v) and restored cut %d; want one crash restoring a committed cut", mistake.WallClock, wrong.summary.Crashes, wrong.summary.UnfiredFaults, restored)
		}
		lost, twice := inFlightAt(wrong, restored)
		if lost > 0 && twice > 0 {
			break
		}
		if try == wallClockTries {
			return nil, fmt.Errorf("--teach %s: in %d runs the restored cut never had records both lost and counted twice in flight (the last: cut %d, %d lost, %d twice): no rows moved between the phases of saving (a less busy machine, or a longer --input, gives them time)", mistake.WallClock, wallClockTries, restored, lost, twice)
		}
		c.log.Info("the restored cut had no records both lost and counted twice: running the wrong run again", "try", try, "restored", restored, "lost", lost, "twice", twice)
	}
	// The records the restored cut lost or doubled, and what they do to
	// each key.
	byID, err := c.inputByID(cfg)
	if err != nil {
		return nil, err
	}
	lost, twice := map[int64]bool{}, map[int64]bool{}
	delta := map[int64][2]int64{} // key: count, sum
	for _, s := range wrong.steps {
		if s.Point != restored {
			continue
		}
		sign, set := int64(-1), lost
		if strings.HasPrefix(s.Note, "twice") {
			sign, set = 1, twice
		}
		for _, id := range s.IDs {
			r, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("--teach %s: the cut names record %d, which the input does not hold", mistake.WallClock, id)
			}
			set[id] = true
			d := delta[r.Key]
			delta[r.Key] = [2]int64{d[0] + sign, d[1] + sign*r.Value}
		}
	}
	want, err := perKey(ref.result)
	if err != nil {
		return nil, err
	}
	got, err := perKey(wrong.result)
	if err != nil {
		return nil, err
	}
	predicted, observed := map[int64][2]int64{}, map[int64][2]int64{}
	for k, d := range delta {
		if d != [2]int64{} {
			predicted[k] = d
		}
	}
	for k := range mergeKeys(want, got) {
		if d := [2]int64{got[k][0] - want[k][0], got[k][1] - want[k][1]}; d != [2]int64{} {
			observed[k] = d
		}
	}

	rightEq := right.result.Diff(ref.result, 3) == ""
	v := &verdict{wrong: wrong, right: right,
		wrongGot: fmt.Sprintf("wall clock: restored point %d, %d keys off the reference", restored, len(observed)),
		rightGot: fmt.Sprintf("markers: %d keys %s", len(right.result.Rows), equalWord(rightEq)),
		predicted: fmt.Sprintf("cut %d: %d in flight lost (ids %s), %d twice (ids %s): %s",
			restored, len(lost), idList(lost), len(twice), idList(twice), keyDeltas(predicted)),
		observed: keyDeltas(observed),
	}
	v.holds = rightEq && len(lost)+len(twice) > 0 && equalDeltas(predicted, observed)
	return v, nil
}

// wallClockCrash is the lesson's crash: --fail's, or trace's default
// worker kill half-way through the input held back until the first cut
// has completed and been committed (the executor's CommitPoint, not only
// durable: a cut is logged once complete), so a restart restores a cut
// the lesson has the in-flight records of.
func (c *classroom) wallClockCrash(exec run.Executor, cfg run.Config, ref *traced) ([]fault.Spec, error) {
	fails, err := c.crash(exec, cfg, ref)
	if err != nil || c.f.noFails || len(c.fails) > 0 {
		return fails, err
	}
	p := exec.Traits().CommitPoint
	if p == "" {
		return nil, fmt.Errorf("--teach %s: executor %s names no commit point to hold its crash back to", mistake.WallClock, exec.Name())
	}
	for i := range fails {
		fails[i].AfterPoint = p
	}
	if err := fault.Validate(fails, exec.FailPoints(), exec.Workers(cfg)); err != nil {
		return nil, fmt.Errorf("--teach %s's crash: %w", mistake.WallClock, err)
	}
	return fails, nil
}

// inFlightAt is how many records the wrong run's cut point had in
// flight: lost, and counted twice.
func inFlightAt(t *traced, point int64) (lost, twice int) {
	for _, s := range t.steps {
		if s.Point != point {
			continue
		}
		if strings.HasPrefix(s.Note, "twice") {
			twice += len(s.IDs)
		} else {
			lost += len(s.IDs)
		}
	}
	return lost, twice
}

// wallClockInputs is the lesson's input unless --input names one: 2400
// records over 0.8 s, long enough that the first cut is usually taken
// while the sources still read, even on a busy machine.
func (c *classroom) wallClockInputs(cfg run.Config) map[string]string {
	if len(c.f.inputs) > 0 {
		return cfg.Inputs
	}
	return map[string]string{job.DefaultInput: fmt.Sprintf("gen:records=2400,keys=4,partitions=2,rate=3000,seed=%d", cfg.Seed)}
}

// inputByID is every record of cfg's input by id.
func (c *classroom) inputByID(cfg run.Config) (map[int64]inputRecord, error) {
	out := map[int64]inputRecord{}
	for name, spec := range cfg.Inputs {
		parts, err := partitionNames(spec)
		if err != nil {
			return nil, err
		}
		for p := range parts {
			recs, err := c.records(cfg, name, p, 0, math.MaxInt64)
			if err != nil {
				return nil, err
			}
			for _, r := range recs {
				out[r.ID] = r
			}
		}
	}
	return out, nil
}

// perKey is a keyed count's result: each key's count and sum.
func perKey(t *sink.Table) (map[int64][2]int64, error) {
	k, n, s := slices.Index(t.Columns, "key"), slices.Index(t.Columns, "count"), slices.Index(t.Columns, "sum")
	if k < 0 || n < 0 || s < 0 {
		return nil, fmt.Errorf("the output has no key, count and sum columns (columns %v)", t.Columns)
	}
	out := map[int64][2]int64{}
	for _, r := range t.Rows {
		out[r[k]] = [2]int64{r[n], r[s]}
	}
	return out, nil
}

func mergeKeys(a, b map[int64][2]int64) map[int64]bool {
	out := map[int64]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func equalDeltas(a, b map[int64][2]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, d := range a {
		if b[k] != d {
			return false
		}
	}
	return true
}

// keyDeltas says per key how the count and sum differ: "key 2 count -1
// sum -47".
func keyDeltas(d map[int64][2]int64) string {
	if len(d) == 0 {
		return "every key right"
	}
	keys := slices.Sorted(func(yield func(int64) bool) {
		for k := range d {
			if !yield(k) {
				return
			}
		}
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("key %d count %+d sum %+d", k, d[k][0], d[k][1]))
	}
	return strings.Join(parts, ", ")
}
