package microbatch

// This file holds microbatch's mistake of `rewind trace --teach`
// (package mistake): a marker sent through every micro-batch as well as
// the cut at its seam. It is made only when run.Env.Mistake names it,
// which only trace sets.

import (
	"fmt"
	"sync"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// mistakes are the mistakes microbatch can make, for Traits.Mistakes.
var mistakes = []mistake.Name{mistake.MarkerInMicrobatch}

// batchMarker is a marker travelling through one micro-batch: every stage
// subtask, once it has processed all of its input of the batch, takes the
// marker on each input channel and saves its part, as the record-wise
// protocol would. The seam after the batch then saves the same state
// again, so the marker's part is compared with the seam's, key group by
// key group.
type batchMarker struct {
	plan  *mistake.Plan
	mu    sync.Mutex
	parts map[[2]int][keygroup.Count]uint64 // (stage, worker): fingerprints at the marker
}

// marker is the batch's marker when the run sends one, else nil.
func (c *coordinator) marker() *batchMarker {
	if !c.env.Mistake.Is(mistake.MarkerInMicrobatch) {
		return nil
	}
	return &batchMarker{plan: c.env.Mistake, parts: map[[2]int][keygroup.Count]uint64{}}
}

// reached is the marker reaching stage si on worker w, behind all of the
// subtask's input of the batch: it crosses every input channel and the
// subtask saves its part (its operator's snapshot, fingerprinted as the
// seam's state versions are).
func (m *batchMarker) reached(se *stageEnv, w *worker, si int) error {
	if m == nil {
		return nil
	}
	st := se.topo.stages[si]
	if se.trace != nil {
		for _, e := range st.Inputs {
			from := se.topo.index[e.From]
			prods := []int{w.id}
			if e.Exchange != job.Forward {
				prods = prods[:0]
				for p := range se.workers {
					prods = append(prods, p)
				}
			}
			for _, p := range prods {
				se.trace.Record(spacetime.Event{Kind: spacetime.Marker, From: stageLane(se.topo, from, p), To: stageLane(se.topo, si, w.id),
					Worker: w.id, ID: se.plan.Batch})
			}
		}
	}
	if !se.topo.stateful[si] {
		return nil
	}
	s, err := w.takeSnapshot(si, se.alloc)
	if err != nil {
		return fmt.Errorf("marker snapshot of stage %s subtask %d: %w", st.ID, w.id, err)
	}
	fps := s.fingerprints()
	s.release()
	m.mu.Lock()
	m.parts[[2]int{si, w.id}] = fps
	m.mu.Unlock()
	return nil
}

// atSeam compares the seam's part of stage s.si on s.worker with the
// marker's and logs it: From key groups of To (those non-empty at either)
// hold the same state at both.
func (m *batchMarker) atSeam(c *coordinator, s *stageSnap) {
	if m == nil {
		return
	}
	m.mu.Lock()
	at, ok := m.parts[[2]int{s.si, s.worker.id}]
	m.mu.Unlock()
	fps := s.fingerprints()
	var same, groups int64
	for kg := range at {
		if at[kg] == 0 && fps[kg] == 0 {
			continue
		}
		groups++
		if ok && at[kg] == fps[kg] {
			same++
		}
	}
	note := "the marker's part holds what the seam saves"
	if !ok {
		note = "no marker reached this part"
	} else if same != groups {
		note = "the marker's part differs from the seam's"
	}
	m.plan.Did(mistake.Step{Point: c.cur.Batch, Task: stageLane(c.topo, s.si, s.worker.id), From: same, To: groups,
		Note: note + " (From of To key groups equal)"})
}
