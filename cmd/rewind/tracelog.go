package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// describeEvent renders one progress event as a few indented lines. Unknown
// events are shown raw, so nothing an executor reports is hidden.
func describeEvent(ev report.TimedEvent) string {
	var b strings.Builder
	at := fmt.Sprintf("%8.1f ms  ", float64(ev.At.Microseconds())/1000)
	var e map[string]any
	_ = json.Unmarshal(ev.Raw, &e)
	num := func(k string) float64 { v, _ := e[k].(float64); return v }
	switch ev.Event {
	case "checkpoint":
		status, _ := e["status"].(string)
		fmt.Fprintf(&b, "%scheckpoint %.0f %s: ", at, num("id"), strings.ToUpper(status))
		// A point whose completion was only noticed at restore has no
		// timing: the coordinator that would have measured it died.
		if num("trigger_ms") > 0 || num("duration_ms") > 0 {
			fmt.Fprintf(&b, "triggered at %.1f ms, took %.1f ms; ", num("trigger_ms"), num("duration_ms"))
		}
		fmt.Fprintf(&b, "state %.0f B, in flight %.0f records (%.0f B)", num("state_bytes"), num("in_flight_records"), num("in_flight_bytes"))
		if r, ok := e["reason"].(string); ok && r != "" {
			fmt.Fprintf(&b, " (%s)", r)
		}
		b.WriteString("\n")
		tasks, _ := e["tasks"].([]any)
		for _, t := range tasks {
			m, _ := t.(map[string]any)
			f := func(k string) float64 { v, _ := m[k].(float64); return v }
			mode := "aligned"
			if u, _ := m["unaligned"].(bool); u {
				mode = "unaligned"
			}
			fmt.Fprintf(&b, "%14s%-10v marker after %5.1f ms, %s in %.2f ms, copy %.2f ms, write %.2f ms, state %.0f B, in flight %.0f records\n",
				"", m["task"], f("start_delay_ms"), mode, f("alignment_ms"), f("sync_ms"), f("async_ms"), f("state_bytes"), f("in_flight_records"))
		}
	case "batch":
		if st, _ := e["status"].(string); st != "" && st != "completed" {
			fmt.Fprintf(&b, "%sbatch %.0f %s: %v\n", at, num("batch_id"), strings.ToUpper(st), e["reason"])
			break
		}
		d, _ := e["durations_ms"].(map[string]any)
		g := func(k string) float64 { v, _ := d[k].(float64); return v }
		rerun := ""
		if r, _ := e["rerun"].(bool); r {
			rerun = " (RE-RUN)"
		}
		fmt.Fprintf(&b, "%sbatch %.0f%s: %.0f rows; offsets logged %.1f ms, run %.1f ms, state %.1f ms, sink %.1f ms, commit logged %.1f ms\n",
			at, num("batch_id"), rerun, num("input_rows"), g("offsets_log"), g("run"), g("state_commit"), g("sink"), g("commit_log"))
		srcs, _ := e["sources"].([]any)
		var ranges []string
		for _, sv := range srcs {
			m, _ := sv.(map[string]any)
			ranges = append(ranges, fmt.Sprintf("%v/%v [%v, %v)", m["input"], m["partition"], m["start_offset"], m["end_offset"]))
		}
		if len(ranges) > 0 {
			fmt.Fprintf(&b, "%14soffsets %s\n", "", strings.Join(ranges, "  "))
		}
	case "job_committed":
		fmt.Fprintf(&b, "%sfinite job %.0f committed: %.0f records, %.0f units run (%.0f re-run), %.0f records re-read, %.0f B materialised in %.0f files\n",
			at, num("job"), num("records"), num("units_run"), num("units_rerun"), num("records_reread"), num("bytes_materialised"), num("files_materialised"))
	case "progress":
		fmt.Fprintf(&b, "%sprogress: %.0f records read, %.0f rows out, %.0f records/s\n",
			at, num("records_in"), num("rows_out"), num("input_rows_per_second"))
	case "crash":
		fmt.Fprintf(&b, "%sCRASH: %v\n", at, e["cause"])
	case "recovery":
		from := ""
		if v, ok := e["from_checkpoint"].(float64); ok {
			from = fmt.Sprintf(" from checkpoint %.0f", v)
			if v == 0 {
				from = " from the start of the input"
			}
		}
		fmt.Fprintf(&b, "%sRECOVERED%s: detect %.1f ms, restore %.1f ms, %.0f records to read again\n",
			at, from, num("detect_ms"), num("restore_ms"), num("reprocessed_records"))
	case "lost_pieces":
		fmt.Fprintf(&b, "%slost pieces (%v): %.0f lost, %.0f rebuilt, %.0f records re-read in %.1f ms\n",
			at, e["recovery"], num("pieces_lost"), num("pieces_rebuilt"), num("records_reread"), num("rebuild_ms"))
	default:
		fmt.Fprintf(&b, "%s%s %s\n", at, ev.Event, ev.Raw)
	}
	return b.String()
}
