package report

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteText writes a short human summary.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s on %s", s.Job, s.Executor)
	if s.Barriers != nil {
		fmt.Fprintf(&b, " (%s barriers)", *s.Barriers)
	}
	fmt.Fprintf(&b, ", sink %s/%s -> %s", s.SinkMode, s.OutputFormat, s.Output)
	if s.RunID != nil {
		fmt.Fprintf(&b, ", run %s", *s.RunID)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  read %d records, wrote %d rows (%d visible, %d after resolving, %d duplicates)\n",
		s.RecordsIn, s.RowsOut, s.VisibleRows, s.ResolvedRows, s.SinkDuplicateRows)
	if r := s.ResumedFrom; r != nil {
		switch {
		case r.ID != nil:
			fmt.Fprintf(&b, "  resumed run from %s %d, which covers %d records\n", r.Kind, *r.ID, r.RecordsBefore)
		case r.RecordsBefore == 0:
			fmt.Fprintf(&b, "  resumed run from the start: storage held no complete %s\n", r.Kind)
		default: // disk-phase: finished units of a finite job not yet committed
			fmt.Fprintf(&b, "  resumed run with no complete %s in storage; the finished work there covers %d records\n", r.Kind, r.RecordsBefore)
		}
	}
	fmt.Fprintf(&b, "  wall %.0f ms, %.0f records/s\n", s.WallMs, s.ThroughputRPS)
	if s.LatencyMs != nil {
		fmt.Fprintf(&b, "  latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", s.LatencyMs.P50, s.LatencyMs.P99, s.LatencyMs.Max)
	}
	if s.Checkpoints != nil {
		fmt.Fprintf(&b, "  recovery points: %d completed, %d failed, %d aborted\n", s.Checkpoints.Completed, s.Checkpoints.Failed, s.Checkpoints.Aborted)
	}
	fmt.Fprintf(&b, "  crashes %d, late rows %d, lost records %d\n", s.Crashes, s.LateRows, s.LostRecords)
	if s.History != nil {
		kinds := make([]string, 0, len(s.History.Counts))
		for k := range s.History.Counts {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for i, k := range kinds {
			kinds[i] = fmt.Sprintf("%s %d", k, s.History.Counts[k])
		}
		fmt.Fprintf(&b, "  progress events: %s (the newest of each are in --summary json)\n", strings.Join(kinds, ", "))
	}
	if lp := s.LostPieces; lp != nil && lp.Recoveries > 0 {
		fmt.Fprintf(&b, "  lost pieces (%s): %d lost, %d rebuilt, %d records fed again", lp.Recovery, lp.PiecesLost, lp.PiecesRebuilt, lp.RecordsReread)
		if lp.RebuildMs != nil {
			fmt.Fprintf(&b, " in %.1f ms", *lp.RebuildMs)
		}
		b.WriteString("\n")
	}
	s.writeBills(&b)
	s.writeHistoryTable(&b)
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TextWidth is the widest line the bill and history blocks of the text
// summary write: a longer one (a long cause or reason) is cut, not wrapped.
const TextWidth = 100

// clip cuts line to TextWidth columns, marking the cut.
func clip(line string) string {
	if r := []rune(line); len(r) > TextWidth {
		return string(r[:TextWidth-3]) + "..."
	}
	return line
}

// writeBills writes the bill of every crash: when it happened and what each
// part of its recovery cost, "-" for what was not measured.
func (s *Summary) writeBills(b *strings.Builder) {
	for i, r := range s.Recoveries {
		modelled := func(part string) string {
			for _, m := range r.Modelled {
				if m == part {
					return " (modelled)"
				}
			}
			return ""
		}
		ms := func(v *float64, part string) string {
			if v == nil {
				return "-"
			}
			return fmt.Sprintf("%.1f ms%s", *v, modelled(part))
		}
		fmt.Fprintln(b, clip(fmt.Sprintf("  crash %d at %s: %s", i+1, ms(r.AtMs, "at"), r.Cause)))
		bytes, records := "-", "-"
		if r.RestoreBytes != nil {
			bytes = fmt.Sprintf("%d B", *r.RestoreBytes)
		}
		if r.ReprocessedRecords != nil {
			records = fmt.Sprintf("%d records", *r.ReprocessedRecords)
		}
		fmt.Fprintln(b, clip(fmt.Sprintf("    detect %s, acquire %s, restore %s reading %s",
			ms(r.DetectMs, "detect"), ms(r.AcquireMs, "acquire"), ms(r.RestoreMs, "restore"), bytes)))
		fmt.Fprintln(b, clip(fmt.Sprintf("    reprocessed %s in %s, catch-up %s, recovered %s",
			records, ms(r.ReprocessMs, "reprocess"), ms(r.CatchUpMs, "catch_up"), ms(r.RecoveredMs, "recovered"))))
	}
}

// recoveryPointEvents are the progress events that each describe one
// recovery point: a checkpoint, a committed batch, a committed finite job.
var recoveryPointEvents = []string{"checkpoint", "batch", "job_committed"}

// historyColumn is one column of the history table and the event fields
// it is read from, the first present one winning; the executors name the
// same figure differently (a checkpoint's id, a batch's batch_id).
type historyColumn struct {
	title  string
	fields [][]string // each a path into the event's object
	format func(v any) string
}

func fieldMs(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.1f", f)
	}
	return "-"
}

func fieldInt(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.0f", f)
	}
	return "-"
}

func fieldString(v any) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	return "-"
}

var historyColumns = []historyColumn{
	{"kind", [][]string{{"event"}}, fieldString},
	{"id", [][]string{{"id"}, {"batch_id"}, {"job"}}, fieldInt},
	{"at ms", [][]string{{"t_ms"}}, fieldMs},
	{"duration ms", [][]string{{"duration_ms"}, {"durations_ms", "total"}}, fieldMs},
	{"size B", [][]string{{"state_bytes"}, {"bytes_materialised"}}, fieldInt},
	{"align ms", [][]string{{"max_alignment_ms"}}, fieldMs},
	{"in-flight B", [][]string{{"in_flight_bytes"}}, fieldInt},
	{"status", [][]string{{"status"}}, fieldString},
}

// lookup follows path into the decoded event, nil when a step is missing.
func lookup(ev map[string]any, path []string) any {
	var v any = ev
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// writeHistoryTable writes the newest HistoryKeep recovery points among the
// kept events, oldest first, as Flink's checkpoint history lists them. The
// reason of a failed or aborted point follows its status.
func (s *Summary) writeHistoryTable(b *strings.Builder) {
	if s.History == nil {
		return
	}
	var events []map[string]any
	for _, kind := range recoveryPointEvents {
		for _, raw := range s.History.Recent[kind] {
			var ev map[string]any
			if json.Unmarshal(raw, &ev) == nil {
				events = append(events, ev)
			}
		}
	}
	if len(events) == 0 {
		return
	}
	at := func(ev map[string]any) float64 { f, _ := ev["t_ms"].(float64); return f }
	sort.SliceStable(events, func(i, j int) bool { return at(events[i]) < at(events[j]) })
	if len(events) > HistoryKeep {
		events = events[len(events)-HistoryKeep:]
	}
	rows := [][]string{make([]string, len(historyColumns))}
	for i, c := range historyColumns {
		rows[0][i] = c.title
	}
	for _, ev := range events {
		row := make([]string, len(historyColumns))
		for i, c := range historyColumns {
			row[i] = "-"
			for _, path := range c.fields {
				if v := lookup(ev, path); v != nil {
					row[i] = c.format(v)
					break
				}
			}
		}
		if r := fieldString(ev["reason"]); r != "-" {
			row[len(row)-1] += ": " + r
		}
		rows = append(rows, row)
	}
	width := make([]int, len(historyColumns))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len(cell))
		}
	}
	fmt.Fprintf(b, "  recovery points, the newest %d of the run:\n", len(events))
	for _, row := range rows {
		var line strings.Builder
		line.WriteString("   ")
		for i, cell := range row {
			if i == len(row)-1 { // status and reason last, unpadded
				fmt.Fprintf(&line, " %s", cell)
				continue
			}
			if i == 0 {
				fmt.Fprintf(&line, " %-*s", width[i], cell)
				continue
			}
			fmt.Fprintf(&line, " %*s", width[i], cell)
		}
		fmt.Fprintln(b, clip(line.String()))
	}
}
