package recordwise

// This file holds the deliberately wrong variants of the protocol that
// `rewind trace --teach` runs (package mistake). Each is reached from one
// check of run.Env.Mistake at the place the right protocol is: the
// recorded read positions of a source part, the in-flight data of an
// unaligned part, and the choice of what a restart restores. Nothing here
// runs unless the trace command set a mistake.

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// cutMistakes are the mistakes of this file, for Traits.Mistakes.
var cutMistakes = []mistake.Name{mistake.OffsetBehind, mistake.OffsetAhead, mistake.UnalignedNoInflight,
	mistake.PartialPoint, mistake.RestartNoRestore}

// misplaceCut is what a source part saves under OffsetBehind and
// OffsetAhead: each partition's read position moved Plan.Records records
// off the cut (behind: not below 0; ahead: not past the partition's
// end), so the position no longer names the boundary of the prefix the
// rest of the recovery point reflects. Under PartialPoint it moves
// nothing and logs the cut itself, which the lesson needs to tell what a
// part of this point holds once some other part of it is missing.
func (t *task) misplaceCut(id checkpoint.ID, sources []partitionState) {
	m := t.inc.env.Mistake
	if !m.Is(mistake.OffsetBehind) && !m.Is(mistake.OffsetAhead) && !m.Is(mistake.PartialPoint) {
		return
	}
	for i := range sources {
		s, p := &sources[i], t.src.parts[i]
		step := mistake.Step{Point: int64(id), Task: string(t.id), Input: s.Input, Partition: p.index}
		switch {
		case m.Is(mistake.PartialPoint):
			step.To, step.Note = s.Offset, "cut"
		case s.Done:
			// A finished partition's position is past every record: there
			// is nothing left to skip, and replaying it is no lesson.
			continue
		case m.Is(mistake.OffsetBehind):
			saved := max(0, s.Offset-m.Records)
			if saved == s.Offset {
				continue
			}
			step.From, step.To, step.Note = saved, s.Offset, "read position saved behind the cut"
			s.Offset = saved
		case m.Is(mistake.OffsetAhead):
			saved := t.lastOpenable(p, s.Offset, s.Offset+m.Records)
			if saved == s.Offset {
				continue
			}
			step.From, step.To, step.Note = s.Offset, saved, "read position saved ahead of the cut"
			s.Offset = saved
		default:
			continue
		}
		m.Did(step)
	}
}

// lastOpenable is the greatest offset in [from, to] at which partition p
// can be opened: a bounded source refuses a position past its end, and a
// saved position it refuses would fail the restore instead of showing
// what skipping records does.
func (t *task) lastOpenable(p *partReader, from, to int64) int64 {
	src := t.inc.env.Sources[t.src.input]
	for off := to; off > from; off-- {
		r, err := src.Open(t.ctx, p.index, source.Position{Partition: p.name, Offset: off}, t.alloc)
		if err == nil {
			_ = r.Close()
			return off
		}
	}
	return from
}

// dropInFlight is what an unaligned part keeps of its in-flight data under
// UnalignedNoInflight: nothing. The records the barrier overtook (output
// channels) and those that preceded it on a channel but arrived after the
// snapshot (input channels) are in no operator's state and behind every
// source's saved position, so a restore from this point has them nowhere.
func (inc *incarnation) dropInFlight(task checkpoint.TaskID, ck *pendingCk) {
	if !inc.env.Mistake.Is(mistake.UnalignedNoInflight) {
		return
	}
	var ids []int64
	drop := func(items []item) {
		for _, it := range items {
			if it.kind == kData {
				ids = append(ids, batchIDs(it.batch)...)
			}
			it.release()
		}
	}
	for _, ch := range sortedKeys(ck.inState) {
		drop(ck.inState[ch])
	}
	for _, items := range ck.outState {
		drop(items)
	}
	ck.inState, ck.outState = nil, nil
	if len(ids) > 0 {
		slices.Sort(ids)
		inc.env.Mistake.Did(mistake.Step{Point: int64(ck.id), Task: string(task), IDs: ids, Note: "in-flight records not persisted"})
	}
}

// batchIDs are the values of b's id column (none if it has none).
func batchIDs(b arrow.RecordBatch) []int64 {
	idx := b.Schema().FieldIndices(source.ColID)
	if len(idx) == 0 {
		return nil
	}
	col, ok := b.Column(idx[0]).(*array.Int64)
	if !ok {
		return nil
	}
	return slices.Clone(col.Int64Values())
}

// forgetState is what a restart restores under RestartNoRestore: the
// sources' saved positions and nothing else. Operator state and in-flight
// data are dropped, so the counts start again from zero while the sources
// go on from the cut; the log names, per partition, the records [0, cut)
// the dropped state had counted.
func (inc *incarnation) forgetState(rp *restoredPoint) {
	if !inc.env.Mistake.Is(mistake.RestartNoRestore) || !rp.found {
		return
	}
	for _, task := range slices.Sorted(maps.Keys(rp.parts)) {
		lp := rp.parts[task]
		for _, s := range lp.desc.Sources {
			inc.env.Mistake.Did(mistake.Step{Point: int64(rp.id), Task: string(task), Input: s.Input,
				Partition: inc.partitionIndex(s.Input, s.Partition), To: s.Offset, Note: "state of the records before the cut not restored"})
		}
		for _, its := range lp.in {
			for _, it := range its {
				it.release()
			}
		}
		for _, its := range lp.out {
			for _, it := range its {
				it.release()
			}
		}
		lp.in, lp.out = nil, nil
	}
	for _, parts := range rp.opStates {
		operator.ReleaseStates(parts)
	}
	rp.opStates = map[string][]operator.KeyGroupState{}
}

// restoresParts says the restart restores under PartialPoint. The wrong
// restore keeps the newest complete point for the sink's epochs; with
// none there is nothing to mix.
func (inc *incarnation) restoresParts(plan checkpoint.RestorePlan) bool {
	return inc.env.Mistake.Is(mistake.PartialPoint) && plan.Found
}

// restorePartial is what a restart restores under PartialPoint: each task
// its own newest part, whether or not the checkpoint it belongs to has
// metadata, that is whether or not every other part of it was durable.
// The newest complete point still gives the sink its epochs. A task with
// no part anywhere starts from nothing. The log says, for every task,
// which point it restored (0: none), and for a source task the read
// position of each partition.
func (inc *incarnation) restorePartial(ctx context.Context, listing checkpoint.Listing, plan checkpoint.RestorePlan) (rp *restoredPoint, err error) {
	base, err := inc.load(ctx, plan.From)
	if err != nil {
		return nil, err
	}
	rp = &restoredPoint{found: true, id: plan.From, meta: base.meta, bytes: base.bytes, parts: map[checkpoint.TaskID]*loadedPart{},
		opStates: map[string][]operator.KeyGroupState{}, sources: map[string]map[string]partitionState{}}
	base.release()
	defer func() {
		if err != nil {
			rp.release()
			rp = nil
		}
	}()
	ids := slices.Concat(listing.WithMetadata, listing.PartsOnly)
	slices.SortFunc(ids, func(a, b checkpoint.ID) int { return int(b) - int(a) })
	ids = slices.Compact(ids)
	pl := inc.plan
	for _, c := range pl.chains {
		for sub := 0; sub < pl.parallelism; sub++ {
			task := checkpoint.TaskID(taskLane(c, sub))
			got := checkpoint.ID(0)
			for _, id := range ids {
				one := &restoredPoint{found: true, id: id, parts: map[checkpoint.TaskID]*loadedPart{},
					opStates: map[string][]operator.KeyGroupState{}, sources: map[string]map[string]partitionState{}}
				if err := inc.loadPart(ctx, one, id, task, partKey(id, task)); err != nil {
					one.release()
					if ctx.Err() != nil {
						return rp, ctx.Err()
					}
					continue // not durable in this checkpoint: an older one may have it
				}
				rp.take(one)
				got = id
				break
			}
			if got == 0 {
				rp.parts[task] = &loadedPart{desc: partDesc{OutputWatermark: operator.NoWatermark}}
			}
			inc.logPartial(c, sub, task, got, rp.parts[task])
		}
	}
	return rp, nil
}

// take moves everything one loaded into rp.
func (rp *restoredPoint) take(one *restoredPoint) {
	rp.bytes += one.bytes
	for task, lp := range one.parts {
		rp.parts[task] = lp
	}
	for stage, parts := range one.opStates {
		rp.opStates[stage] = append(rp.opStates[stage], parts...)
	}
	for input, m := range one.sources {
		if rp.sources[input] == nil {
			rp.sources[input] = map[string]partitionState{}
		}
		for name, s := range m {
			rp.sources[input][name] = s
		}
	}
}

// logPartial logs what task (subtask sub of chain c) restored: for a
// source task, one step per partition with the read position it resumes
// from; for another, one step whose Partition is the subtask (whose key
// groups it owns).
func (inc *incarnation) logPartial(c *chain, sub int, task checkpoint.TaskID, got checkpoint.ID, lp *loadedPart) {
	note := fmt.Sprintf("restored its part of point %d", got)
	if got == 0 {
		note = "no part anywhere: restored nothing"
	}
	m := inc.env.Mistake
	if c.source == nil {
		m.Did(mistake.Step{Point: int64(got), Task: string(task), Partition: sub, Note: note})
		return
	}
	input := c.source.Input
	names := inc.env.Sources[input].Partitions()
	for k, name := range names {
		if k%inc.plan.parallelism != sub {
			continue
		}
		var off int64
		for _, s := range lp.desc.Sources {
			if s.Partition == name {
				off = s.Offset
			}
		}
		m.Did(mistake.Step{Point: int64(got), Task: string(task), Input: input, Partition: k, To: off, Note: note})
	}
}

// partitionIndex is the index of partition name in input (-1: none).
func (inc *incarnation) partitionIndex(input, name string) int {
	if src, ok := inc.env.Sources[input]; ok {
		return slices.Index(src.Partitions(), name)
	}
	return -1
}
