package main

import (
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func init() {
	addLesson(lesson{
		name:  mistake.AppendAfterReplay,
		brief: "right state, the replayed rows published twice",
		why: "A restore rewinds the state and the read positions, not the destination: " +
			"the rows published after the restored recovery point are published again by the replay. " +
			"An append sink keeps both copies; a transactional sink shows only what a complete " +
			"recovery point covers, and an idempotent one writes the copy under the same key.",
		teach: teachAppendAfterReplay,
	})
}

// teachAppendAfterReplay runs etl with one crash into an append sink and
// into a transactional one. It predicts the duplicates from the run's own
// replay marks and the rows visible when it reported its restore: every
// replayed record whose row was already visible is published twice.
func teachAppendAfterReplay(c *classroom) (*verdict, error) {
	if err := c.useDestinationJob(mistake.AppendAfterReplay); err != nil {
		return nil, err
	}
	exec := c.defaultExecutor()
	cfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	ref, err := c.reference(cfg)
	if err != nil {
		return nil, err
	}
	fails, err := c.crash(exec, cfg, ref)
	if err != nil {
		return nil, err
	}
	cfg.SinkMode, cfg.Fails = sink.Append, fails
	wrong, err := c.run(exec, cfg, &mistake.Plan{Name: mistake.AppendAfterReplay})
	if err != nil {
		return nil, err
	}
	rcfg, err := c.config(exec)
	if err != nil {
		return nil, err
	}
	rcfg.SinkMode, rcfg.Fails = sink.Transactional, fails
	right, err := c.run(exec, rcfg, nil)
	if err != nil {
		return nil, err
	}
	if wrong.summary.Crashes != 1 {
		return nil, fmt.Errorf("--teach %s: the append run crashed %d times, want once (the crash %v)", mistake.AppendAfterReplay, wrong.summary.Crashes, wrong.summary.UnfiredFaults)
	}

	// The mistake's log is the replay: which records were read again.
	ranges, err := replayed(wrong)
	if err != nil {
		return nil, err
	}
	again := map[int64]bool{}
	for _, r := range ranges {
		recs, err := c.records(cfg, r.Input, r.Partition, r.From, r.To)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			again[rec.ID] = true
		}
	}
	wrong.steps = ranges
	s := wrong.summary
	if s.SinkDuplicateRows == 0 {
		return nil, fmt.Errorf("--teach %s: the crash (%s) left no row published beyond the recovery point restored, so the replay duplicated none (%s publishes with its recovery points?): give --fail a crash after the sink's flush and before the point is complete",
			mistake.AppendAfterReplay, traceStory{cfg: wrong.cfg}.crashes(), exec.Name())
	}
	// The files visible when the run reported its restore are what it
	// published before; the rest the replay published.
	if wrong.beforeRestore == nil {
		return nil, fmt.Errorf("--teach %s: %s reported no recovery event, so what it published before its restore cannot be told from its replay", mistake.AppendAfterReplay, exec.Name())
	}
	early := map[string]bool{}
	for _, f := range wrong.beforeRestore {
		early[f] = true
	}
	before, err := c.publishedIn(wrong, func(f string) bool { return early[f] })
	if err != nil {
		return nil, err
	}
	after, err := c.publishedIn(wrong, func(f string) bool { return !early[f] })
	if err != nil {
		return nil, err
	}
	predicted, observed := map[int64]bool{}, map[int64]bool{}
	for id := range again {
		if before[id] {
			predicted[id] = true
		}
	}
	for id := range before {
		if after[id] {
			observed[id] = true
		}
	}

	rightEq := right.result.Diff(ref.result, 3) == ""
	wrongResolvedEq := wrong.result.Diff(ref.result, 3) == ""
	v := &verdict{wrong: wrong, right: right,
		wrongGot: fmt.Sprintf("%d visible rows for %d records, %d duplicates; resolved %s",
			s.VisibleRows, len(ref.result.Rows), s.SinkDuplicateRows, equalWord(wrongResolvedEq)),
		rightGot: fmt.Sprintf("%s sink: %d visible rows, %d duplicates, %s",
			right.cfg.SinkMode, right.summary.VisibleRows, right.summary.SinkDuplicateRows, equalWord(rightEq)),
		predicted: fmt.Sprintf("%d of %d replayed records were visible: ids %s", len(predicted), len(again), idList(predicted)),
		observed:  fmt.Sprintf("%d rows twice: ids %s", s.SinkDuplicateRows, idList(observed)),
	}
	v.holds = rightEq && wrongResolvedEq && right.summary.SinkDuplicateRows == 0 &&
		sameIDs(predicted, observed) && int64(len(predicted)) == s.SinkDuplicateRows && len(predicted) > 0
	return v, nil
}

// equalWord says whether a result equals the reference's.
func equalWord(eq bool) string {
	if eq {
		return "= reference"
	}
	return "≠ reference"
}
