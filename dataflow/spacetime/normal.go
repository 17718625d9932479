package spacetime

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Normalise renders lanes and events as text that does not depend on
// timing, for golden tests of an executor's story: no times, no batch
// sizes, and on each lane only the order that the protocol fixes. Each
// lane lists the events on it (a Batch or Marker is on its receiving lane,
// To) in recorded order, split at its milestones (snapshots, points,
// seams, commits, units, pieces, the replay region; a snapshot's
// durability is placed after the loose events before the next milestone,
// since an upload ends beside the task's work). Between two
// milestones the markers, blocking, in-flight records and ledger entries,
// whose interleaving is a matter of timing, are sorted and counted (xN),
// without their channel: which channel's marker comes first is timing,
// how many arrive before the snapshot is the protocol. Which channels held
// records when a barrier overtook them is timing too, so in-flight records
// are summed up at the end: the points that persisted some. How
// many batches a lane receives, and when, is timing too: a lane ends with
// the lanes it received batches from. Where a replay starts and ends
// (its offsets) depends on where the point was cut, so those are left out.
// Events on no lane (a crash) come first, in order. keepRecords names
// kinds whose Records count is deterministic and kept.
func Normalise(lanes []Lane, events []Event, keepRecords ...string) string {
	var b strings.Builder
	var run []string
	byLane := map[string][]Event{}
	inFlight := map[int64]bool{}
	for _, e := range events {
		if e.Kind == InFlight {
			inFlight[e.ID] = true
			continue
		}
		lane := e.Lane
		if e.Kind == Batch || e.Kind == Marker {
			lane = e.To
		}
		if lane == "" {
			run = append(run, line(e, false, keepRecords))
			continue
		}
		byLane[lane] = append(byLane[lane], e)
	}
	if len(run) > 0 {
		b.WriteString("run\n")
		for _, l := range run {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	for _, l := range lanes {
		fmt.Fprintf(&b, "lane %s kind=%s worker=%d\n", l.ID, l.Kind, l.Worker)
		var loose, durable []string
		from := map[string]bool{}
		flush := func() {
			slices.Sort(loose)
			for i := 0; i < len(loose); {
				j := i + 1
				for j < len(loose) && loose[j] == loose[i] {
					j++
				}
				if n := j - i; n > 1 {
					fmt.Fprintf(&b, "  . %s x%d\n", loose[i], n)
				} else {
					fmt.Fprintf(&b, "  . %s\n", loose[i])
				}
				i = j
			}
			loose = loose[:0]
			for _, d := range durable {
				fmt.Fprintf(&b, "  %s\n", d)
			}
			durable = durable[:0]
		}
		for _, e := range byLane[l.ID] {
			switch e.Kind {
			case Batch:
				from[e.From] = true
				continue
			case Marker:
				e.From, e.Channel = "", ""
			case BlockStart, BlockEnd:
				e.Channel = ""
			case ReplayStart, ReplayEnd:
				e.ID = 0
			}
			s := line(e, e.Kind == Batch || e.Kind == Marker, keepRecords)
			if e.Kind == SnapshotDurable {
				// A part becomes durable when its upload ends, beside the
				// task's own work: where it falls among the loose events
				// is timing, so it waits for the next milestone.
				durable = append(durable, s)
				continue
			}
			if milestone(e.Kind) {
				flush()
				fmt.Fprintf(&b, "  %s\n", s)
				continue
			}
			loose = append(loose, s)
		}
		flush()
		if len(from) > 0 {
			fmt.Fprintf(&b, "  batches from %s\n", strings.Join(slices.Sorted(maps.Keys(from)), " "))
		}
		delete(byLane, l.ID)
	}
	if len(inFlight) > 0 {
		fmt.Fprintf(&b, "in-flight records persisted with points %s\n", strings.Trim(fmt.Sprint(slices.Sorted(maps.Keys(inFlight))), "[]"))
	}
	for _, id := range slices.Sorted(maps.Keys(byLane)) {
		fmt.Fprintf(&b, "undeclared lane %s: %d events\n", id, len(byLane[id]))
	}
	return b.String()
}

// milestone reports whether events of kind k keep their place on a lane.
func milestone(k string) bool {
	switch k {
	case Batch, Marker, BlockStart, BlockEnd, InFlight, Ledger:
		return false
	}
	return true
}

// line is one event without its time; onTo drops To (the lane itself).
func line(e Event, onTo bool, keepRecords []string) string {
	var b strings.Builder
	b.WriteString(e.Kind)
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("from", e.From)
	if !onTo {
		add("to", e.To)
	}
	add("channel", e.Channel)
	if e.Lane == "" && e.Kind != Batch && e.Kind != Marker {
		add("worker", fmt.Sprint(e.Worker))
	}
	switch e.Kind {
	case Batch, Crash, ReplayStart, ReplayEnd:
		// no id worth keeping (a batch's is that of its seam, if any)
	default:
		add("id", fmt.Sprint(e.ID))
	}
	if e.Records != 0 && slices.Contains(keepRecords, e.Kind) {
		add("records", fmt.Sprint(e.Records))
	}
	if e.Rerun {
		b.WriteString(" rerun")
	}
	if e.Replay {
		b.WriteString(" replay")
	}
	if e.Note != "" {
		fmt.Fprintf(&b, " note=%q", e.Note)
	}
	return b.String()
}
