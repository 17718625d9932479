package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// TableWidth is the most columns the terminal table takes; details go to
// the files.
const TableWidth = 100

// nameWidth is the widest contestant name kept on its figures' line; a
// longer one gets a line of its own above them.
const nameWidth = 22

// column is one figure of a table: its title and the stat it shows.
type column struct {
	title string
	key   string
}

// WriteTable writes the terminal summary: the scenario in a line or two,
// steady state, the recovery bill, what recovery re-read and what the
// sink saw (each as median with the min–max of the repeats under it),
// the verdict per contestant, a line per problem, and where the files
// are. No line is wider than TableWidth.
func (r *Results) WriteTable(w io.Writer) error {
	groups := r.Aggregate()
	var b strings.Builder
	for _, l := range wrap(r.scenarioLine(), TableWidth, "  ") {
		b.WriteString(l + "\n")
	}
	if len(r.Calibration) > 0 {
		var caps []string
		for _, c := range r.Calibration {
			caps = append(caps, fmt.Sprintf("%s %s rec/s", c.Contestant, compact(c.RPS)))
		}
		for _, l := range wrap("Capacity, unpaced (calibration): "+strings.Join(caps, ", ")+".", TableWidth, "  ") {
			b.WriteString(l + "\n")
		}
	}
	writeStatTable(&b, "Steady state, after the warm-up and before the fault (median; min–max below)", groups, []column{
		{"rec/s", "throughput_rps"}, {"p50 ms", "latency_p50_ms"}, {"p99 ms", "latency_p99_ms"},
		{"max ms", "latency_max_ms"}, {"point ms", "checkpoint_ms"},
	})
	detect, acquire := billTitle(groups, "detect"), billTitle(groups, "acquire")
	writeStatTable(&b, "Recovery bill, ms: fault → recovered (median; min–max below)", groups, []column{
		{detect, "detect_ms"}, {acquire, "acquire_ms"}, {"restore", "restore_ms"}, {"reprocess", "reprocess_ms"},
		{"catch-up", "catch_up_ms"}, {"recovered", "recovered_ms"},
	})
	if strings.Contains(detect, "*") || strings.Contains(acquire, "*") {
		b.WriteString("* modelled: a configured delay, the same for every contestant, not measured.\n")
	}
	if strings.Contains(detect, "+") || strings.Contains(acquire, "+") {
		b.WriteString("+ measured on worker processes (--workers process): detect from the SIGKILL to the broken\n" +
			"  connection, acquire from the replacement's start to its ready.\n")
	}
	b.WriteString("Reprocess (re-reading old input) is within catch-up. Recovered is fault → caught up.\n")
	writeStatTable(&b, "Re-read and sink (median; min–max below)", groups, []column{
		{"restored B", "restore_bytes"}, {"re-read rec", "reprocessed_records"}, {"dup rows", "duplicate_rows"},
		{"conflict rows", "conflicting_rows"}, {"lost rec", "lost_records"},
	})
	b.WriteString("\nCorrectness (resolved output against the reference's):\n")
	for _, g := range groups {
		mark := "ok  "
		if g.Correct() < len(g.Runs) {
			mark = "FAIL"
		}
		line := fmt.Sprintf("  %s %s: %d of %d runs equal the reference", mark, g.Name(), g.Correct(), len(g.Runs))
		for _, l := range wrap(line, TableWidth, "       ") {
			b.WriteString(l + "\n")
		}
	}
	if probs := r.Problems(); len(probs) > 0 {
		fmt.Fprintf(&b, "\nProblems (%d):\n", len(probs))
		for _, p := range probs {
			for _, l := range wrap("  - "+p, TableWidth, "    ") {
				b.WriteString(l + "\n")
			}
		}
	}
	if r.dir != "" {
		names := make([]string, len(r.files))
		for i, f := range r.files {
			names[i] = filepath.Base(f)
		}
		b.WriteString("\n")
		text := fmt.Sprintf("Files in %s: %s (open report.html in a browser).", r.dir, strings.Join(names, ", "))
		for _, l := range wrap(text, TableWidth, "  ") {
			b.WriteString(l + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scenarioLine says in a sentence what every contestant was given.
func (r *Results) scenarioLine() string {
	s := r.Scenario
	line := fmt.Sprintf("rewind bench: %s, %s of input at %s rec/s (warm-up %s), parallelism %d, sink %s",
		s.Job, seconds(s.DurationMs), compact(s.Rate), seconds(s.WarmupMs), s.Parallelism, s.SinkMode)
	if s.Fault != "" {
		line += fmt.Sprintf("; fault %s, moved by up to %s per repeat", s.Fault, seconds(s.JitterMs))
	} else {
		line += "; no fault"
	}
	line += fmt.Sprintf("; %s, seed %d", plural(s.Repeat, "repeat"), s.Seed)
	if s.Sweep != "" {
		line += fmt.Sprintf("; sweep %s = %s (rows: contestant @point)", s.Sweep, strings.Join(s.SweepPoints, ", "))
	}
	return line + "."
}

// billTitle is part's column title, marked * where a run modelled it and
// + where a run measured it on a worker process.
func billTitle(groups []*Group, part string) string {
	title := part
	if anyModelled(groups, part) {
		title += "*"
	}
	for _, g := range groups {
		if g.Measured(part) {
			return title + "+"
		}
	}
	return title
}

func anyModelled(groups []*Group, part string) bool {
	for _, g := range groups {
		if g.Modelled(part) {
			return true
		}
	}
	return false
}

// writeStatTable writes one table: a header, then per group a line of
// medians and, when the repeats differ, a line of their min–max ranges
// right under it. Names wider than nameWidth get a line of their own.
func writeStatTable(b *strings.Builder, title string, groups []*Group, cols []column) {
	nameW := width("contestant")
	for _, g := range groups {
		if n := width(g.Name()); n > nameW && n <= nameWidth {
			nameW = n
		}
	}
	widths := make([]int, len(cols))
	tops := make([][]string, len(groups))
	bottoms := make([][]string, len(groups))
	for j, c := range cols {
		widths[j] = width(c.title)
	}
	for i, g := range groups {
		tops[i], bottoms[i] = make([]string, len(cols)), make([]string, len(cols))
		for j, c := range cols {
			s := g.Stat(c.key)
			tops[i][j], bottoms[i][j] = medianCell(s), rangeCell(s)
			widths[j] = max(widths[j], width(tops[i][j]), width(bottoms[i][j]))
		}
	}
	line := func(name string, cells []string) {
		var l strings.Builder
		l.WriteString(pad(name, nameW, false))
		for j, c := range cells {
			l.WriteString("  " + pad(c, widths[j], true))
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	b.WriteString("\n" + title + "\n")
	titles := make([]string, len(cols))
	for j, c := range cols {
		titles[j] = c.title
	}
	line("contestant", titles)
	for i, g := range groups {
		name := g.Name()
		if width(name) > nameW {
			for _, l := range wrap(name, TableWidth, "  ") {
				b.WriteString(l + "\n")
			}
			name = ""
		}
		line(name, tops[i])
		if strings.Join(bottoms[i], "") != "" {
			line("", bottoms[i])
		}
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
