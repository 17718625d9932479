package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func init() {
	addLesson(lesson{
		name:  mistake.RestartNoRestore,
		brief: "positions kept, state not: counts start from zero",
		why: "The sources resume at the cut, so every record before it is read only once, before the crash, and the state that counted them is gone. " +
			"The destination still holds the counts published before the crash, and the greater version wins, so each key shows either its old count or its count since the cut, never their sum. " +
			"Positions and state are one recovery point: restore both or neither.",
		teach: (*classroom).restartLesson,
	})
}

// restartLesson: after the restart each key's state counts only its
// records from the cut on; the output keeps, per key, the row with the
// greater count of the one published at the restored point (the records
// before the cut) and the one counted since.
func (c *classroom) restartLesson() (*verdict, error) {
	n := mistake.RestartNoRestore
	// Aligned: the published rows of the restored point then count every
	// record before the cut (unaligned, some are in flight instead).
	r, err := c.cutLesson(n, cutSetup{barriers: "aligned"})
	if err != nil {
		return nil, err
	}
	steps := r.stepsAt(r.restored)
	if len(steps) == 0 {
		return nil, fmt.Errorf("--teach %s: the run restored no recovery point (it restored %d), so there was no state to forget", n, r.restored)
	}
	before, since := changes{}, changes{}
	var where []string
	for _, s := range steps {
		recs, err := c.records(r.wrong.cfg, s.Input, s.Partition, 0, wholePartition)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.Offset < s.To {
				before.add(rec, 1)
			} else {
				since.add(rec, 1)
			}
		}
		where = append(where, fmt.Sprintf("p%d [0,%d)", s.Partition, s.To))
	}
	slices.Sort(where)
	j, err := job.Build(r.wrong.cfg.Job, r.wrong.cfg.Params)
	if err != nil {
		return nil, err
	}
	predicted, err := resolvedOfTwo(j.Output, r.ref.result.Columns, before, since)
	if err != nil {
		return nil, err
	}
	// What the output loses of each key: the records of whichever row
	// lost, before the cut or since.
	pred := changes{}
	for k, p := range predicted {
		lost := before[k]
		if p == before[k] {
			lost = since[k]
		}
		if lost != nil {
			pred[k] = &change{count: -lost.count, sum: -lost.sum, ids: lost.ids}
		}
	}
	return r.cutVerdict(n, pred, fmt.Sprintf("point %d: %s not restored", r.restored, strings.Join(where, " ")))
}

// resolvedOfTwo is, per key, which of two rows the output keeps (by the
// output's own resolution): the one counting the records in a or the one
// counting those in b.
func resolvedOfTwo(layout sink.Layout, cols []string, a, b changes) (map[int64]*change, error) {
	idx := map[string]int{}
	for _, name := range []string{"key", "count", "sum", sink.VersionColumn} {
		if idx[name] = slices.Index(cols, name); idx[name] < 0 {
			return nil, fmt.Errorf("the output has no %s column (columns %v)", name, cols)
		}
	}
	var rows [][]int64
	of := map[[3]int64]*change{}
	for _, m := range []changes{a, b} {
		for k, d := range m {
			row := make([]int64, len(cols))
			row[idx["key"]], row[idx["count"]], row[idx["sum"]], row[idx[sink.VersionColumn]] = k, d.count, d.sum, d.count
			rows = append(rows, row)
			of[[3]int64{k, d.count, d.sum}] = d
		}
	}
	t, _, err := sink.ResolveRows(layout, cols, rows)
	if err != nil {
		return nil, err
	}
	out := map[int64]*change{}
	for _, row := range t.Rows {
		out[row[idx["key"]]] = of[[3]int64{row[idx["key"]], row[idx["count"]], row[idx["sum"]]}]
	}
	for k := range maps.Keys(a) {
		if out[k] == nil {
			return nil, fmt.Errorf("resolving the predicted rows lost key %d", k)
		}
	}
	return out, nil
}
