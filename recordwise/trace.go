package recordwise

// This file holds what recordwise tells a time-space diagram
// (run.Env.Trace): a lane per task and one for the coordinator, and the
// names of the channels between tasks. Every call site checks the
// recorder for nil first, so an ordinary run pays that check alone.

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// coordinatorLane is the coordinator's lane.
const coordinatorLane = "coordinator"

// declareLanes adds one lane per task, in plan order, then the
// coordinator's. A task's lane is named by its task id.
func declareLanes(tr *spacetime.Recorder, pl *plan) {
	if tr == nil {
		return
	}
	for _, c := range pl.chains {
		kind := "operator"
		switch {
		case c.source != nil:
			kind = "source"
		case c.sink && len(c.ops) == 0:
			kind = "sink"
		}
		stages := make([]string, 0, len(c.ops)+2)
		if c.source != nil {
			stages = append(stages, c.source.ID)
		}
		for _, s := range c.ops {
			stages = append(stages, s.ID)
		}
		if c.sink {
			stages = append(stages, "sink")
		}
		for sub := 0; sub < pl.parallelism; sub++ {
			tr.AddLane(spacetime.Lane{ID: taskLane(c, sub), Kind: kind, Worker: sub,
				Label: fmt.Sprintf("%s #%d", strings.Join(stages, "→"), sub)})
		}
	}
	tr.AddLane(spacetime.Lane{ID: coordinatorLane, Kind: "coordinator", Worker: -1, Label: "coordinator"})
}

// taskLane is the lane of subtask sub of chain c: its task id.
func taskLane(c *chain, sub int) string { return fmt.Sprintf("%s-%d", c.name, sub) }

// channelName names the channel from one task to another.
func channelName(from, to string) string { return from + "->" + to }

// traceChannels gives every task the lanes and channel names of its input
// channels, and every router those of its output channels, when the run
// is traced.
func (inc *incarnation) traceChannels(names map[*queue][2]string) {
	for _, t := range inc.tasks {
		for _, q := range t.in {
			n := names[q]
			t.inFrom = append(t.inFrom, n[0])
			t.inChan = append(t.inChan, channelName(n[0], n[1]))
		}
		if t.router != nil {
			for _, oc := range t.router.outs {
				n := names[oc.q]
				t.outChan = append(t.outChan, channelName(n[0], n[1]))
			}
		}
	}
}

// traceItem records a data item or a marker arriving on input channel c.
func (t *task) traceItem(tr *spacetime.Recorder, c int, it item) {
	switch it.kind {
	case kData:
		tr.Record(spacetime.Event{Kind: spacetime.Batch, From: t.inFrom[c], To: string(t.id), Channel: t.inChan[c],
			Worker: t.sub, Records: int64(it.rows()), Replay: it.replay})
	case kBarrier:
		tr.Record(spacetime.Event{Kind: spacetime.Marker, From: t.inFrom[c], To: string(t.id), Channel: t.inChan[c],
			Worker: t.sub, ID: int64(it.id)})
	}
}

// traceSnapshotStart records that the task starts copying its part of
// checkpoint id; a source task first receives the coordinator's marker.
func (t *task) traceSnapshotStart(id checkpoint.ID, note string) {
	tr := t.inc.env.Trace
	if tr == nil {
		return
	}
	if t.src != nil && note == "" {
		tr.Record(spacetime.Event{Kind: spacetime.Marker, From: coordinatorLane, To: string(t.id), Worker: t.sub, ID: int64(id)})
	}
	tr.Record(spacetime.Event{Kind: spacetime.SnapshotStart, Lane: string(t.id), Worker: t.sub, ID: int64(id), Note: note})
}

// tracePart records a part written: the in-flight records of each channel
// it persisted, then the part durable.
func tracePart(tr *spacetime.Recorder, j partJob, streams []chanStream) {
	for _, s := range streams {
		var n int64
		for _, it := range s.items {
			if it.kind == kData {
				n += int64(it.rows())
			}
		}
		if n == 0 {
			continue
		}
		ch := ""
		if s.dir == dirInput && s.channel < len(j.inChan) {
			ch = j.inChan[s.channel]
		} else if s.dir == dirOutput && s.channel < len(j.outChan) {
			ch = j.outChan[s.channel]
		}
		tr.Record(spacetime.Event{Kind: spacetime.InFlight, Lane: string(j.task), Channel: ch, Worker: j.sub,
			ID: int64(j.ck.id), Records: n})
	}
	tr.Record(spacetime.Event{Kind: spacetime.SnapshotDurable, Lane: string(j.task), Worker: j.sub, ID: int64(j.ck.id)})
}

// abortNote is why the coordinator gave a checkpoint up, in one line.
func abortNote(a checkpoint.Abort) string {
	note := a.Reason.String()
	if a.Task != "" {
		note += " (" + string(a.Task) + ")"
	}
	if a.Detail != "" {
		note += ": " + a.Detail
	}
	return note
}

// traceCutShort records the checkpoints a crash cut short as failed.
func traceCutShort(tr *spacetime.Recorder, ids []checkpoint.ID, cause string) {
	for _, id := range ids {
		tr.Record(spacetime.Event{Kind: spacetime.PointFailed, Lane: coordinatorLane, Worker: -1, ID: int64(id),
			Note: "cut short by a crash: " + cause})
	}
}

// countForTrigger counts n records read and triggers a checkpoint when
// the count reaches the next of hooks.triggerAfter (tests).
func (inc *incarnation) countForTrigger(n int64) {
	inc.hookMu.Lock()
	inc.hookRead += n
	fire := false
	for inc.hookNext < len(inc.opts.hooks.triggerAfter) && inc.hookRead >= inc.opts.hooks.triggerAfter[inc.hookNext] {
		inc.hookNext++
		fire = true
	}
	inc.hookMu.Unlock()
	if fire {
		inc.coord.post(coordEvent{kind: evTrigger})
	}
}
