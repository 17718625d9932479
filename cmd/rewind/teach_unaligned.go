package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// inflightSinkRate throttles the sink of the unaligned lesson (rows a
// second, --sink-throttle unless given): the counting tasks fall behind
// the sources, so the channels between them hold records for the
// markers to overtake. At trace's paced input nothing would queue.
const inflightSinkRate = 60

func init() {
	addLesson(lesson{
		name:  mistake.UnalignedNoInflight,
		brief: "markers overtake records, none saved: those are lost",
		why: "An unaligned marker jumps the queue: the records it overtakes were read before the cut, so the saved read positions lie past them, yet no operator has counted them. " +
			"They are in neither the state nor the input still to read; only the in-flight data saved with the part holds them. " +
			"Skip saving it and a restore loses exactly those records.",
		teach: (*classroom).unalignedLesson,
	})
}

// unalignedLesson: the records the restored point's parts did not keep in
// flight (named by id in the log) are counted never.
func (c *classroom) unalignedLesson() (*verdict, error) {
	n := mistake.UnalignedNoInflight
	r, err := c.cutLesson(n, cutSetup{barriers: "unaligned", tune: func(cfg *run.Config) {
		if !c.fl.Changed("sink-throttle") {
			cfg.SinkRowsPerSecond = inflightSinkRate
		}
	}})
	if err != nil {
		return nil, err
	}
	steps := r.stepsAt(r.restored)
	if len(steps) == 0 {
		return nil, fmt.Errorf("--teach %s: the restored point %d had no records in flight to drop (its markers overtook none): give a lower --sink-throttle", n, r.restored)
	}
	byID := map[int64]inputRecord{}
	for input, spec := range r.wrong.cfg.Inputs {
		src, err := source.Open(spec, source.Options{})
		if err != nil {
			return nil, err
		}
		parts := len(src.Partitions())
		src.Close()
		for p := range parts {
			recs, err := c.records(r.wrong.cfg, input, p, 0, wholePartition)
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				byID[rec.ID] = rec
			}
		}
	}
	pred := changes{}
	var where []string
	for _, s := range steps {
		for _, id := range s.IDs {
			rec, ok := byID[id]
			if !ok {
				return nil, fmt.Errorf("--teach %s: the log names record %d, which the input does not hold", n, id)
			}
			pred.add(rec, -1)
		}
		where = append(where, fmt.Sprintf("%s: %d", s.Task, len(s.IDs)))
	}
	slices.Sort(where)
	return r.cutVerdict(n, pred, fmt.Sprintf("point %d kept no records in flight (%s)", r.restored, strings.Join(where, ", ")))
}
