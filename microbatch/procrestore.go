package microbatch

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// The control messages between a microbatch coordinator and a worker
// process, after the worker's ready (run.SendReady). The coordinator sends
// restore (the state version to rebuild the operators from: what a
// replacement process does first); the worker answers restored, with the
// rows of state it holds per stage, or error.
const (
	opRestore  = "restore"
	opRestored = "restored"
	opError    = "error"
)

type procMsg struct {
	Op string `json:"op"`

	// restore: the committed state version, its index (the manifest's
	// chains, so the worker reads no log entry of its own) and the
	// restored batch's watermark, delivered again.
	Version   int64      `json:"version,omitempty"`
	Index     stateIndex `json:"index,omitempty"`
	Watermark int64      `json:"watermark,omitempty"`

	// restored: rows of state per stateful stage, in this worker's key
	// groups.
	Rows map[string]int64 `json:"rows,omitempty"`
	// error
	Text string `json:"text,omitempty"`
}

func sendMsg(c *wire.Conn, m procMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding a %s message: %w", m.Op, err)
	}
	return c.SendControl(b)
}

// restore rebuilds this worker's operators from state version m.Version
// in durable storage, its own key groups only, with the same restoreOps
// as a simulated worker's, dropping the operators it held before.
func (pw *procWorker) restore(ctx context.Context, m procMsg) procMsg {
	fail := func(err error) procMsg {
		return procMsg{Op: opError, Text: fmt.Sprintf("microbatch worker %d: restoring state version %d: %v", pw.id, m.Version, err)}
	}
	for stage := range m.Index {
		if si, ok := pw.topo.index[stage]; !ok || !pw.topo.stateful[si] {
			return fail(fmt.Errorf("the index names stage %q, which is not a stateful stage of job %s", stage, pw.topo.job.Name))
		}
	}
	kgs := keygroup.RangeFor(pw.id, pw.cfg.Parallelism)
	ls, err := loadState(ctx, pw.store, runPrefix(pw.topo.job.Name, pw.cfg.RunID), m.Index,
		func(_ string, kg int) bool { return kg >= kgs.Start && kg < kgs.End }, pw.env.Alloc)
	if err != nil {
		return fail(err)
	}
	defer ls.release()
	pw.drop()
	w := &worker{id: pw.id, stop: make(chan struct{})}
	spec := opsSpec{topo: pw.topo, par: pw.cfg.Parallelism, alloc: pw.env.Alloc, version: m.Version,
		eventTime: pw.topo.job.UsesEventTime, wm: m.Watermark, changes: offersChanges}
	if err := w.restoreOps(spec, ls); err != nil {
		w.closeOps()
		return fail(err)
	}
	pw.w = w
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
	return procMsg{Op: opRestored, Rows: rows}
}

// drop closes the operators the worker holds, if any.
func (pw *procWorker) drop() {
	if pw.w != nil {
		pw.w.closeOps()
		pw.w = nil
	}
}
