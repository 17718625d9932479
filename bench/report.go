package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// notMeasured stands for a figure the executor does not report (a null in
// its summary), so it is never confused with zero.
const notMeasured = "—"

// Bill is the recovery cost of a crash run, summed over its recoveries.
type Bill struct {
	Recoveries  int
	DetectMs    *float64
	RestoreMs   *float64
	Reprocessed *int64
	CatchUpMs   *float64
	// ExtraWallMs is the crash run's wall time minus the crash-free run's.
	// With a paced source it hides most of the bill (the source, not the
	// executor, sets the pace); RecoveryMs does not.
	ExtraWallMs float64
}

// RecoveryMs is detect + restore + catch-up: how long the job was not
// keeping up because of the crash. Nil unless all three were reported.
func (b Bill) RecoveryMs() *float64 {
	if b.DetectMs == nil || b.RestoreMs == nil || b.CatchUpMs == nil {
		return nil
	}
	sum := *b.DetectMs + *b.RestoreMs + *b.CatchUpMs
	return &sum
}

// BillOf sums the recoveries of crash and compares its wall time with
// clean's. A field is nil unless every recovery reported it: a sum over
// some recoveries only would make that contestant look cheaper.
func BillOf(clean, crash *report.Summary) Bill {
	b := Bill{Recoveries: len(crash.Recoveries), ExtraWallMs: crash.WallMs - clean.WallMs}
	if b.Recoveries == 0 {
		return b
	}
	var detect, restore, catchUp float64
	var reprocessed int64
	allDetect, allRestore, allCatchUp, allReprocessed := true, true, true, true
	for _, r := range crash.Recoveries {
		allDetect = allDetect && r.DetectMs != nil
		allRestore = allRestore && r.RestoreMs != nil
		allCatchUp = allCatchUp && r.CatchUpMs != nil
		allReprocessed = allReprocessed && r.ReprocessedRecords != nil
		if allDetect {
			detect += *r.DetectMs
		}
		if allRestore {
			restore += *r.RestoreMs
		}
		if allCatchUp {
			catchUp += *r.CatchUpMs
		}
		if allReprocessed {
			reprocessed += *r.ReprocessedRecords
		}
	}
	if allDetect {
		b.DetectMs = &detect
	}
	if allRestore {
		b.RestoreMs = &restore
	}
	if allCatchUp {
		b.CatchUpMs = &catchUp
	}
	if allReprocessed {
		b.Reprocessed = &reprocessed
	}
	return b
}

func ms(v *float64) string {
	if v == nil {
		return notMeasured
	}
	return fmt.Sprintf("%.1f", *v)
}

func count(v *int64) string {
	if v == nil {
		return notMeasured
	}
	return fmt.Sprintf("%d", *v)
}

func verdict(o *Outcome) string {
	switch {
	case o == nil:
		return notMeasured
	case o.Error != "":
		return "FAILED"
	case !o.Correct:
		return "WRONG"
	case o.Summary != nil && len(o.Summary.UnfiredFaults) > 0:
		// Right, but its recovery bill is of no crash at all.
		return "NO CRASH"
	}
	return "ok"
}

// table is the report as rows of cells, shared by the text and Markdown
// writers so both always say the same thing.
type table struct {
	title string
	head  []string
	rows  [][]string
}

func (r *Report) tables() []table {
	running := table{title: "While running (crash-free run)",
		head: []string{"contestant", "result", "records/s", "p50 ms", "p99 ms", "max ms", "recovery points", "wall ms"}}
	crashed := table{title: "After a crash (" + r.faultText() + ")",
		head: []string{"contestant", "result", "recoveries", "detect ms", "restore ms", "reprocessed records", "catch-up ms", "recovery ms", "extra wall ms", "duplicate rows", "p99 ms"}}
	for _, res := range r.Results {
		row := []string{res.Contestant, verdict(res.Clean)}
		if s := summaryOf(res.Clean); s != nil {
			row = append(row, fmt.Sprintf("%.0f", s.ThroughputRPS))
			row = append(row, latencyCells(s)...)
			row = append(row, checkpointCell(s), fmt.Sprintf("%.0f", s.WallMs))
		} else {
			row = append(row, blanks(6)...)
		}
		running.rows = append(running.rows, row)
		if res.Crash == nil {
			continue
		}
		row = []string{res.Contestant, verdict(res.Crash)}
		clean, crash := summaryOf(res.Clean), summaryOf(res.Crash)
		if clean != nil && crash != nil {
			b := BillOf(clean, crash)
			p99 := notMeasured
			if crash.LatencyMs != nil {
				p99 = fmt.Sprintf("%.1f", crash.LatencyMs.P99)
			}
			row = append(row, fmt.Sprintf("%d", b.Recoveries), ms(b.DetectMs), ms(b.RestoreMs), count(b.Reprocessed),
				ms(b.CatchUpMs), ms(b.RecoveryMs()), fmt.Sprintf("%+.0f", b.ExtraWallMs), fmt.Sprintf("%d", crash.SinkDuplicateRows), p99)
		} else {
			row = append(row, blanks(9)...)
		}
		crashed.rows = append(crashed.rows, row)
	}
	if len(crashed.rows) == 0 {
		return []table{running}
	}
	return []table{running, crashed}
}

func summaryOf(o *Outcome) *report.Summary {
	if o == nil {
		return nil
	}
	return o.Summary
}

func latencyCells(s *report.Summary) []string {
	if s.LatencyMs == nil {
		return blanks(3)
	}
	return []string{fmt.Sprintf("%.1f", s.LatencyMs.P50), fmt.Sprintf("%.1f", s.LatencyMs.P99), fmt.Sprintf("%.1f", s.LatencyMs.Max)}
}

func checkpointCell(s *report.Summary) string {
	if s.Checkpoints == nil {
		return notMeasured
	}
	return fmt.Sprintf("%d", s.Checkpoints.Completed)
}

func blanks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = notMeasured
	}
	return out
}

func (r *Report) faultText() string {
	for _, res := range r.Results {
		if res.Crash != nil {
			return "--fail " + strings.Join(res.Crash.Fails, " --fail ")
		}
	}
	return "no crash"
}

func (r *Report) inputText() string {
	names := make([]string, 0, len(r.Inputs))
	for n := range r.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + r.Inputs[n]
	}
	return strings.Join(parts, " ")
}

// problems lists the runs that failed or were wrong, with the reason.
func (r *Report) problems() []string {
	var out []string
	for _, res := range r.Results {
		for kind, o := range map[string]*Outcome{"crash-free": res.Clean, "crash": res.Crash} {
			switch {
			case o == nil:
			case o.Error != "":
				out = append(out, fmt.Sprintf("%s (%s run) failed: %s", res.Contestant, kind, o.Error))
			case !o.Correct:
				out = append(out, fmt.Sprintf("%s (%s run) differs from the reference:\n%s", res.Contestant, kind, o.Diff))
			}
		}
	}
	sort.Strings(out)
	return out
}

// WriteText writes the comparison as aligned plain-text tables.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "job %s, sink %s, input %s, %d CPUs\n", r.Job, r.SinkMode, r.inputText(), r.CPUs)
	if r.Reference != nil {
		fmt.Fprintf(w, "the failure-free reference run: %d records in, %d rows resolved\n", r.Reference.RecordsIn, r.Reference.ResolvedRows)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(w, "\n%s\n", t.title)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s\t\n", strings.Join(t.head, "\t"))
		for _, row := range t.rows {
			fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\n%s = not reported by that executor. result: ok = resolved output equals the reference.\n", notMeasured)
	for _, p := range r.problems() {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	return nil
}

// WriteJSON writes the whole report as one JSON object on one line.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteReport writes report.md, report.json and the plots into dir.
func (r *Report) WriteReport(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots, err := r.writePlots(dir)
	if err != nil {
		return fmt.Errorf("drawing plots: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# rewind bench: %s\n\n", r.Job)
	fmt.Fprintf(&b, "- started %s on %d CPUs\n- input `%s`\n- sink mode %s\n", r.Started.Format("2006-01-02 15:04:05 UTC"), r.CPUs, r.inputText(), r.SinkMode)
	if r.Reference != nil {
		fmt.Fprintf(&b, "- reference: %d records in, %d rows resolved\n", r.Reference.RecordsIn, r.Reference.ResolvedRows)
	}
	for _, t := range r.tables() {
		fmt.Fprintf(&b, "\n## %s\n\n| %s |\n|%s\n", t.title, strings.Join(t.head, " | "), strings.Repeat("---|", len(t.head)))
		for _, row := range t.rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Fprintf(&b, "\n%s = not reported by that executor; result ok = the resolved output equals the reference executor's.\n", notMeasured)
	for _, p := range plots {
		fmt.Fprintf(&b, "\n![%s](%s)\n", p.title, p.file)
	}
	if probs := r.problems(); len(probs) > 0 {
		b.WriteString("\n## Problems\n\n")
		for _, p := range probs {
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(p, "\n", "\n  "))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
