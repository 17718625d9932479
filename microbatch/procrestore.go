package microbatch

import (
	"context"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// reset rebuilds this worker's operators from state version m.Version in
// durable storage, its own key groups only, with the same restoreOps as a
// simulated worker's, dropping the operators and the batch it held
// before; with m.Reopen its readers start again at m.Ends. It answers
// with the rows of state it holds per stage.
func (pw *procWorker) reset(ctx context.Context, m procMsg) (procMsg, error) {
	fail := func(err error) (procMsg, error) {
		return procMsg{}, fmt.Errorf("microbatch worker %d: restoring state version %d: %w", pw.id, m.Version, err)
	}
	for stage := range m.Index {
		if si, ok := pw.topo.index[stage]; !ok || !pw.topo.stateful[si] {
			return fail(fmt.Errorf("the index names stage %q, which is not a stateful stage of job %s", stage, pw.topo.job.Name))
		}
	}
	pw.dropBatch()
	pw.env.Trace.SeedReads(m.Reads)
	read := pw.store.Read()
	kgs := keygroup.RangeFor(pw.id, pw.cfg.Parallelism)
	ls, err := loadState(ctx, pw.store, runPrefix(pw.topo.job.Name, pw.cfg.RunID), m.Index,
		func(_ string, kg int) bool { return kg >= kgs.Start && kg < kgs.End }, pw.env.Alloc)
	if err != nil {
		return fail(err)
	}
	defer ls.release()
	if pw.w == nil {
		pw.w = &worker{id: pw.id, stop: make(chan struct{})}
	}
	w := pw.w
	w.closeOps()
	spec := opsSpec{topo: pw.topo, par: pw.cfg.Parallelism, alloc: pw.env.Alloc, version: m.Version,
		eventTime: pw.topo.job.UsesEventTime, wm: m.Watermark, changes: offersChanges}
	if err := w.restoreOps(spec, ls); err != nil {
		w.closeOps()
		return fail(err)
	}
	if m.Reopen {
		for g, sc := range m.Pace {
			if g >= 0 && g < len(pw.topo.parts) {
				p := pw.topo.parts[g]
				source.FollowSchedule(p.src, p.index, sc)
			}
		}
		if err := pw.reopen(ctx, m.Ends); err != nil {
			return procMsg{}, fmt.Errorf("microbatch worker %d: %w", pw.id, err)
		}
	}
	rows := map[string]int64{}
	for si, op := range w.ops {
		st, ok := op.(operator.Stateful)
		if !ok || !pw.topo.stateful[si] {
			continue
		}
		parts, err := st.Snapshot()
		if err != nil {
			return fail(err)
		}
		var n int64
		for _, p := range parts {
			n += p.Batch.NumRows()
			p.Batch.Release()
		}
		rows[pw.topo.stages[si].ID] = n
	}
	return procMsg{Rows: rows, Read: pw.store.Read() - read}, nil
}

// drop closes the operators and readers the worker holds, if any.
func (pw *procWorker) drop() {
	pw.dropBatch()
	if pw.w != nil {
		pw.w.closeReaders()
		pw.w.closeOps()
		pw.w = nil
	}
}
