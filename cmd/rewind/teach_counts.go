package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// What the lessons about the cut share (offset-behind, offset-ahead,
// unaligned-no-inflight, partial-point, restart-no-restore): each runs the
// keyed-count job through a transactional sink, so the resolved output is
// the count each key's state reached (docs/output-contract.md); crashes a
// worker once a recovery point is complete; and predicts, from the
// mistake's log and the input alone, by how much each key's count and sum
// are off.

// countJob is the job the lessons about the cut run: a record that is
// counted twice or never shows as one key's count off by one.
const countJob = "keyed-count"

// wholePartition is the end offset the lessons read a whole partition to:
// far past any input a lesson can draw (trace's are 60 records).
const wholePartition = 1 << 20

// cutSetup is what a lesson about the cut asks of its runs.
type cutSetup struct {
	// barriers is the barrier mode the lesson needs ("": --barriers).
	barriers string
	// records is the mistake's size (mistake.Plan.Records).
	records int64
	// crash is the lesson's crash (nil: worker 1 at half the input, once
	// the first recovery point is durable).
	crash func(exec run.Executor, cfg run.Config) ([]fault.Spec, error)
	// tune changes the config of the three runs (nil: nothing).
	tune func(*run.Config)
}

// cutRuns are a lesson's three runs and what the wrong one restored.
type cutRuns struct {
	ref, wrong, right *traced
	plan              *mistake.Plan
	// restored is the recovery point the wrong run restored after its
	// crash, from its diagram's restore event.
	restored int64
}

// cutLesson runs the reference, the wrong variant (making mistake n) and
// the right one on the same input with the same crash.
func (c *classroom) cutLesson(n mistake.Name, setup cutSetup) (*cutRuns, error) {
	if c.fl.Changed("job") && c.f.job != countJob {
		return nil, usagef("invalid --job %q for --teach %s: the lesson runs the %s job (a record counted twice or never shows in its key's count)", c.f.job, n, countJob)
	}
	c.f.job = countJob
	if c.fl.Changed("sink-mode") && c.f.sinkMode != string(sink.Transactional) {
		return nil, usagef("invalid --sink-mode %q for --teach %s: the lesson runs a transactional sink, whose output is what the state counted", c.f.sinkMode, n)
	}
	c.f.sinkMode = string(sink.Transactional)
	if setup.barriers != "" {
		if c.fl.Changed("barriers") && c.f.barriers != setup.barriers {
			return nil, usagef("invalid --barriers %q for --teach %s: the mistake needs %s barriers", c.f.barriers, n, setup.barriers)
		}
		c.f.barriers = setup.barriers
	}
	if c.fl.Changed("fail") {
		return nil, usagef("invalid --fail for --teach %s: the lesson chooses its crash, where the mistake shows", n)
	}
	exec, err := c.executorFor(n)
	if err != nil {
		return nil, err
	}
	configure := func() (run.Config, error) {
		cfg, err := c.config(exec)
		if err != nil {
			return cfg, err
		}
		if setup.tune != nil {
			setup.tune(&cfg)
		}
		return cfg, nil
	}
	cfg, err := configure()
	if err != nil {
		return nil, err
	}
	r := &cutRuns{plan: &mistake.Plan{Name: n, Records: setup.records}}
	if r.ref, err = c.reference(cfg); err != nil {
		return nil, err
	}
	crash := setup.crash
	if crash == nil {
		crash = func(exec run.Executor, cfg run.Config) ([]fault.Spec, error) {
			return []fault.Spec{{Worker: min(1, exec.Workers(cfg)-1), AfterRecords: max(r.ref.summary.RecordsIn/2, 1),
				AfterPoint: exec.Traits().FirstDurablePoint}}, nil
		}
	}
	fails, err := crash(exec, cfg)
	if err != nil {
		return nil, err
	}
	if err := fault.Validate(fails, exec.FailPoints(), exec.Workers(cfg)); err != nil {
		return nil, fmt.Errorf("--teach %s: the lesson's crash: %w", n, err)
	}
	cfg.Fails = fails
	if r.wrong, err = c.run(exec, cfg, r.plan); err != nil {
		return nil, err
	}
	if cfg, err = configure(); err != nil {
		return nil, err
	}
	cfg.Fails = fails
	if r.right, err = c.run(exec, cfg, nil); err != nil {
		return nil, err
	}
	for _, t := range []*traced{r.wrong, r.right} {
		if len(t.summary.UnfiredFaults) > 0 {
			return nil, fmt.Errorf("--teach %s: the crash %s did not fire before the input ended, so no restore shows the mistake: give a slower --input (a lower rate=)", n, t.summary.UnfiredFaults[0])
		}
	}
	r.restored = -1
	found := false
	for _, e := range r.wrong.rec.Events {
		if e.Kind == spacetime.Restore {
			r.restored, found = e.ID, true
		}
	}
	if !found {
		return nil, fmt.Errorf("--teach %s: the wrong run recorded no restore after its crash", n)
	}
	return r, nil
}

// stepsAt are the logged steps of point id.
func (r *cutRuns) stepsAt(id int64) []mistake.Step {
	var out []mistake.Step
	for _, s := range r.plan.Steps() {
		if s.Point == id {
			out = append(out, s)
		}
	}
	return out
}

// keyCount is one key's row of keyed-count's output.
type keyCount struct{ count, sum int64 }

// keyCounts reads a keyed-count result: key -> count and sum.
func keyCounts(t *sink.Table) (map[int64]keyCount, error) {
	k, n, s := slices.Index(t.Columns, "key"), slices.Index(t.Columns, "count"), slices.Index(t.Columns, "sum")
	if k < 0 || n < 0 || s < 0 {
		return nil, fmt.Errorf("the output has no key, count and sum columns (columns %v)", t.Columns)
	}
	out := make(map[int64]keyCount, len(t.Rows))
	for _, row := range t.Rows {
		out[row[k]] = keyCount{count: row[n], sum: row[s]}
	}
	return out, nil
}

// change is how far one key's count and sum are off, and the records that
// make the difference (predictions only).
type change struct {
	count, sum int64
	ids        []int64
}

// changes are the keys that are off.
type changes map[int64]*change

// add counts rec sign times more (-1: once less). A record the job's
// filter drops (value < 0, docs/jobs.md) changes no count.
func (ch changes) add(rec inputRecord, sign int64) {
	if rec.Value < 0 {
		return
	}
	d := ch[rec.Key]
	if d == nil {
		d = &change{}
		ch[rec.Key] = d
	}
	d.count += sign
	d.sum += sign * rec.Value
	d.ids = append(d.ids, rec.ID)
}

// diffCounts are the keys whose count or sum in got differ from want.
func diffCounts(got, want map[int64]keyCount) changes {
	out := changes{}
	for k := range got {
		if d := (keyCount{got[k].count - want[k].count, got[k].sum - want[k].sum}); d != (keyCount{}) {
			out[k] = &change{count: d.count, sum: d.sum}
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok {
			out[k] = &change{count: -w.count, sum: -w.sum}
		}
	}
	return out
}

// same reports whether a and b change the same keys by the same counts
// and sums.
func (ch changes) same(b changes) bool {
	if len(ch) != len(b) {
		return false
	}
	for k, d := range ch {
		e, ok := b[k]
		if !ok || d.count != e.count || d.sum != e.sum {
			return false
		}
	}
	return true
}

// sameCounts is same without the sums.
func (ch changes) sameCounts(b changes) bool {
	if len(ch) != len(b) {
		return false
	}
	for k, d := range ch {
		if e, ok := b[k]; !ok || d.count != e.count {
			return false
		}
	}
	return true
}

// describe is "key 2 +2 (ids 31 35), key 0 -1 (id 12)": the ids when
// withIDs, the sums when withSums, "no key off" when nothing is.
func (ch changes) describe(withIDs, withSums bool) string {
	if len(ch) == 0 {
		return "no key off"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ch)) {
		d := ch[k]
		s := fmt.Sprintf("key %d %+d", k, d.count)
		var in []string
		if withSums {
			in = append(in, fmt.Sprintf("sum %+d", d.sum))
		}
		if withIDs && len(d.ids) > 0 {
			ids := slices.Sorted(slices.Values(d.ids))
			word := "ids"
			if len(ids) == 1 {
				word = "id"
			}
			in = append(in, word+" "+joinIDs(ids))
		}
		if len(in) > 0 {
			s += " (" + strings.Join(in, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, " ")
}

// got says in a line what a run's counts were beside the reference's.
func got(run, ref map[int64]keyCount) string {
	d := diffCounts(run, ref)
	if len(d) == 0 {
		return fmt.Sprintf("all %d keys counted as the reference counts them", len(ref))
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		parts = append(parts, fmt.Sprintf("key %d counted %d (reference %d)", k, run[k].count, ref[k].count))
	}
	return strings.Join(parts, ", ")
}

// cutVerdict compares the wrong run's counts with the reference's and the
// prediction, and checks the right run equals the reference. where says
// what the prediction read ("p0 [20,23) read twice").
func (r *cutRuns) cutVerdict(n mistake.Name, pred changes, where string) (*verdict, error) {
	if len(pred) == 0 {
		return nil, fmt.Errorf("--teach %s: the mistake changed no count this run (%s): try another --seed", n, where)
	}
	ref, err := keyCounts(r.ref.result)
	if err != nil {
		return nil, err
	}
	wrong, err := keyCounts(r.wrong.result)
	if err != nil {
		return nil, err
	}
	right, err := keyCounts(r.right.result)
	if err != nil {
		return nil, err
	}
	obs := diffCounts(wrong, ref)
	v := &verdict{wrong: r.wrong, right: r.right, wrongGot: got(wrong, ref), rightGot: got(right, ref),
		holds: pred.same(obs) && len(diffCounts(right, ref)) == 0 && r.right.result.Diff(r.ref.result, 1) == ""}
	// The sums are compared too; the lines show them only when they
	// are what differs.
	sums := !pred.same(obs) && pred.sameCounts(obs)
	v.predicted = where + ": " + pred.describe(true, sums)
	v.observed = obs.describe(false, sums)
	if pred.same(obs) {
		v.observed += ", the sums alike"
	}
	return v, nil
}
