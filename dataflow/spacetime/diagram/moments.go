package diagram

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// Moments writes the steps the lanes cannot spell out, one line each and
// none wider than width: recovery points and why one failed, alignment,
// in-flight records kept, seams with their offsets, units, the crash, the
// restore, the replay and lost pieces. Batches, markers and snapshots are
// counted per point instead of listed.
func Moments(w io.Writer, rec Recording, width int) error {
	if width <= 0 {
		width = 80
	}
	m := newModel(rec)
	type line struct {
		t    time.Duration
		text string
	}
	var lines []line
	say := func(t time.Duration, format string, args ...any) {
		lines = append(lines, line{t, fmt.Sprintf(format, args...)})
	}
	markers := map[int64]int{}
	for _, e := range m.events {
		if e.Kind == spacetime.Marker {
			markers[e.ID]++
		}
	}
	for _, e := range m.events {
		switch e.Kind {
		case spacetime.PointComplete:
			if n := markers[e.ID]; n > 0 {
				say(e.T, "%s complete (markers crossed %d channels)", pointName(e.ID), n)
			} else {
				say(e.T, "%s complete", pointName(e.ID))
			}
		case spacetime.PointFailed:
			say(e.T, "%s FAILED: %s", pointName(e.ID), orDash(e.Note))
		case spacetime.InFlight:
			say(e.T, "%s kept %d in-flight records of %s with %s", m.name(e.Lane), e.Records, e.Channel, pointName(e.ID))
		case spacetime.Seam:
			say(e.T, "batch %d seam, offsets logged: %s", e.ID, orDash(e.Note))
		case spacetime.Commit:
			say(e.T, "commit %d", e.ID)
		case spacetime.Crash:
			if e.Worker < 0 {
				say(e.T, "CRASH of the coordinator: %s", orDash(e.Note))
			} else {
				say(e.T, "CRASH of worker %d: %s", e.Worker, orDash(e.Note))
			}
		case spacetime.Restore:
			say(e.T, "restore %s", pointName(e.ID))
		case spacetime.PieceLost:
			say(e.T, "piece %d of worker %d lost", e.ID, e.Worker)
		case spacetime.PieceRebuilt:
			say(e.T, "piece %d rebuilt on %s %s", e.ID, m.name(e.Lane), e.Note)
		case spacetime.Batch, spacetime.Marker, spacetime.SnapshotStart, spacetime.SnapshotDurable,
			spacetime.BlockStart, spacetime.BlockEnd, spacetime.UnitStart, spacetime.UnitEnd,
			spacetime.ReplayStart, spacetime.ReplayEnd, spacetime.Ledger:
			// Drawn, or told from their spans below.
		default:
			say(e.T, "%s %s %s", e.Kind, e.Lane, e.Note)
		}
	}
	// Blocking, per lane and point: how many channels and for how long.
	type lanePoint struct {
		lane int
		id   int64
	}
	blocks := map[lanePoint][]span{}
	var blockOrder []lanePoint
	// Replays starting within a millisecond are one replay (after one
	// restore), told once with every lane in it.
	type replay struct {
		from, to time.Duration
		lanes    []string
	}
	var replays []replay
	for _, s := range m.spans {
		switch s.kind {
		case spanBlock:
			k := lanePoint{s.lane, s.ev.ID}
			if _, ok := blocks[k]; !ok {
				blockOrder = append(blockOrder, k)
			}
			blocks[k] = append(blocks[k], s)
		case spanReplay:
			id := laneLabel(m.lanes[s.lane])
			if n := len(replays); n > 0 && s.from-replays[n-1].from < time.Millisecond {
				r := &replays[n-1]
				r.to = max(r.to, s.to)
				if !slices.Contains(r.lanes, id) {
					r.lanes = append(r.lanes, id)
				}
				continue
			}
			replays = append(replays, replay{s.from, s.to, []string{id}})
		case spanUnit:
			what := "unit"
			if p := phase(s.ev.Note); p != "" {
				what = p + " unit"
			}
			rerun := ""
			if s.ev.Rerun {
				rerun = " RE-RUN"
			}
			until := "until " + fmtMs(s.to)
			if s.open && s.to < m.end {
				until = "cut short at " + fmtMs(s.to) + " by the crash"
			}
			say(s.from, "%s %d%s on %s %s", what, s.ev.ID, rerun, laneLabel(m.lanes[s.lane]), until)
		}
	}
	for _, k := range blockOrder {
		longest := time.Duration(0)
		for _, s := range blocks[k] {
			longest = max(longest, s.to-s.from)
		}
		say(blocks[k][0].from, "%s aligns for %s: %d channels blocked, up to %s",
			laneLabel(m.lanes[k.lane]), pointName(k.id), len(blocks[k]), fmtMs(longest))
	}
	for _, r := range replays {
		slices.Sort(r.lanes)
		say(r.from, "replay until %s on %s", fmtMs(r.to), strings.Join(r.lanes, ", "))
	}
	// Stable by time: the order above within one moment.
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.t, b.t) })
	var b strings.Builder
	for _, l := range lines {
		text := fmt.Sprintf("%9.1f ms  %s", float64(l.t)/float64(time.Millisecond), strings.TrimSpace(l.text))
		b.WriteString(clipEnd(text, width) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clipEnd cuts a line to width runes, ending it with "..." when cut.
func clipEnd(s string, width int) string {
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-3]) + "..."
}

// name is how the lanes call lane id.
func (m *model) name(id string) string {
	if i, ok := m.index[id]; ok && id != "" {
		return laneLabel(m.lanes[i])
	}
	return id
}
