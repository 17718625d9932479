package main

import (
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func init() {
	addLesson(lesson{
		name:  mistake.ForgetfulSource,
		brief: "a push feed cannot give records back: a counted gap",
		why: "Recovery rewinds every source to the read position saved in the recovery point, " +
			"and a push feed cannot go back: what it handed over since is gone. " +
			"The run goes on from the feed's head and counts the gap as lost_records " +
			"instead of claiming a right result; a re-readable input gives the records again.",
		teach: teachForgetfulSource,
	})
}

// teachForgetfulSource runs etl with one crash over a push feed and over
// the same records from a re-readable generator. It predicts the gap from
// the run's own figures: it starts where the restored recovery point put
// the feed's read position (the replay mark) and is lost_records long.
func teachForgetfulSource(c *classroom) (*verdict, error) {
	if err := c.useDestinationJob(mistake.ForgetfulSource); err != nil {
		return nil, err
	}
	if len(c.f.inputs) > 0 {
		return nil, usagef("invalid --input for --teach %s: the lesson feeds its own input, once as a push feed and once re-readable", mistake.ForgetfulSource)
	}
	exec := c.defaultExecutor()
	cfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	// The same records both ways: a push feed generates them as the
	// generator's one partition does.
	const records, keys, rate = 60, 4, 150
	gen := fmt.Sprintf("records=%d,keys=%d,rate=%d,seed=%d", records, keys, rate, cfg.Seed)
	cfg.Inputs = map[string]string{job.DefaultInput: "gen:partitions=1," + gen}
	ref, err := c.reference(cfg)
	if err != nil {
		return nil, err
	}
	fails, err := c.crash(exec, cfg, ref)
	if err != nil {
		return nil, err
	}
	// A transactional sink shows what the state holds: rows of records
	// the restored point does not cover were never committed.
	cfg.Fails, cfg.SinkMode = fails, sink.Transactional
	right, err := c.run(exec, cfg, nil)
	if err != nil {
		return nil, err
	}
	wcfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	wcfg.Inputs = map[string]string{job.DefaultInput: "push:" + gen}
	wcfg.Fails, wcfg.SinkMode = fails, sink.Transactional
	wrong, err := c.run(exec, wcfg, &mistake.Plan{Name: mistake.ForgetfulSource})
	if err != nil {
		return nil, err
	}
	s := wrong.summary
	if s.Crashes != 1 {
		return nil, fmt.Errorf("--teach %s: the push run crashed %d times, want once", mistake.ForgetfulSource, s.Crashes)
	}

	// Where the feed was rewound to: its replay mark. The gap runs from
	// there for lost_records records of the feed, which are the
	// generator's records at those offsets.
	ranges, err := replayed(wrong)
	if err != nil {
		return nil, err
	}
	if s.LostRecords == 0 {
		return nil, fmt.Errorf("--teach %s: the push run lost no record at its crash (%s), so there is no gap to count: give --fail a crash that kills what %s has read from the feed",
			mistake.ForgetfulSource, traceStory{cfg: wrong.cfg}.crashes(), exec.Name())
	}
	if len(ranges) != 1 {
		return nil, fmt.Errorf("--teach %s: the push run lost %d records but marked %d re-reads of the feed (want one: where the restore put the feed, the gap's start); try another --fail", mistake.ForgetfulSource, s.LostRecords, len(ranges))
	}
	gap := ranges[0]
	gap.To, gap.Note = gap.From+s.LostRecords, "lost: handed over before the crash, not given back"
	wrong.steps = []mistake.Step{gap}
	lost, err := c.records(cfg, job.DefaultInput, 0, gap.From, gap.To)
	if err != nil {
		return nil, err
	}
	refIDs, err := rowIDs(ref.result)
	if err != nil {
		return nil, err
	}
	gotIDs, err := rowIDs(wrong.result)
	if err != nil {
		return nil, err
	}
	// A lost record the job's filter drops has no row to miss.
	predicted, observed := map[int64]bool{}, map[int64]bool{}
	for _, r := range lost {
		if refIDs[r.ID] {
			predicted[r.ID] = true
		}
	}
	extra := 0
	for id := range refIDs {
		if !gotIDs[id] {
			observed[id] = true
		}
	}
	for id := range gotIDs {
		if !refIDs[id] {
			extra++
		}
	}

	rightEq := right.result.Diff(ref.result, 3) == ""
	v := &verdict{wrong: wrong, right: right,
		wrongGot: fmt.Sprintf("push feed: %d of %d rows, lost_records %d", len(wrong.result.Rows), len(ref.result.Rows), s.LostRecords),
		rightGot: fmt.Sprintf("re-readable input: %d rows, lost_records %d, %s", len(right.result.Rows), right.summary.LostRecords, equalWord(rightEq)),
		predicted: fmt.Sprintf("feed offsets %d..%d lost: %d rows missing, ids %s",
			gap.From, gap.To-1, len(predicted), idList(predicted)),
		observed: fmt.Sprintf("%d rows missing, ids %s", len(observed), idList(observed)),
	}
	if extra > 0 {
		v.observed += fmt.Sprintf(", %d rows the reference has not", extra)
	}
	v.holds = rightEq && right.summary.LostRecords == 0 && extra == 0 && s.LostRecords > 0 &&
		int64(len(lost)) == s.LostRecords && sameIDs(predicted, observed)
	if !v.holds && len(lost) != int(s.LostRecords) {
		v.predicted += fmt.Sprintf(" (the input has only %d there)", len(lost))
	}
	return v, nil
}
