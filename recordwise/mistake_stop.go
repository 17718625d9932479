package recordwise

// This file holds recordwise's stop-the-world mistake of `rewind trace
// --teach` (package mistake), and the list of it and the wall-clock one
// (mistake_clock.go). A mistake is made only when run.Env.Mistake names
// it, which only trace sets.

import (
	"fmt"
	"time"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// worldMistakes are the mistakes of mistake_stop.go and mistake_clock.go,
// for Traits.Mistakes.
var worldMistakes = []mistake.Name{mistake.WallClock, mistake.StopTheWorld}

// stopWorld is how far a stop-the-world checkpoint has got: the sources
// stopped at its trigger; every part was saved at saved.
type stopWorld struct {
	id             checkpoint.ID
	stopped, saved time.Time
}

// stopsTheWorld says the run makes the stop-the-world mistake: at each
// trigger every source stops after its barrier, so the barrier drains the
// channels ahead of it (with aligned barriers nothing is overtaken) and
// nothing moves until the checkpoint is complete, when the sources resume.
// Correct, but the job's throughput is zero from the moment every part is
// saved until the metadata is durable, and falls towards zero well before,
// where the marker protocol lets the sources run on.
func (c *coordLoop) stopsTheWorld() bool { return c.inc.env.Mistake.Is(mistake.StopTheWorld) }

// stopSources stops every source right after it injected barrier id.
func (c *coordLoop) stopSources(id checkpoint.ID) {
	if !c.stopsTheWorld() {
		return
	}
	c.stw = &stopWorld{id: id, stopped: time.Now()}
	for _, t := range c.sources {
		t.post(ctrlMsg{kind: ctrlStop, id: id})
	}
}

// worldSaved notes that every part of checkpoint id is durable: from now
// until the sources resume, no record moves anywhere.
func (c *coordLoop) worldSaved(id checkpoint.ID) {
	if c.stw != nil && c.stw.id == id {
		c.stw.saved = time.Now()
	}
}

// resumeSources lets the sources go on once checkpoint id is complete or
// given up, and logs the stop: From and To are when every part was saved
// and when the sources resumed, in microseconds since the Unix epoch.
func (c *coordLoop) resumeSources(id checkpoint.ID, complete bool) {
	w := c.stw
	if w == nil || w.id != id {
		return
	}
	c.stw = nil
	now := time.Now()
	for _, t := range c.sources {
		t.post(ctrlMsg{kind: ctrlResume, id: id})
	}
	if !complete || w.saved.IsZero() {
		return
	}
	c.inc.env.Mistake.Did(mistake.Step{Point: int64(id), Task: coordinatorLane, From: w.saved.UnixMicro(), To: now.UnixMicro(),
		Note: fmt.Sprintf("sources stopped %.1f ms (trigger to resume), nothing moved for the last %.1f ms (every part saved to resume); From, To: Unix µs",
			float64(now.Sub(w.stopped).Microseconds())/1000, float64(now.Sub(w.saved).Microseconds())/1000)})
}
