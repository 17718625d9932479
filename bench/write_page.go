package bench

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/bench/page"
)

// writePage writes report.html: the scenario and machine, the tables with
// every median and min–max, every figure inlined, every run's verdict and
// how to read it.
func (r *Results) writePage(path string, groups []*Group, figs []plotOut) error {
	rep := page.Report{
		Title:     "rewind bench: " + r.Scenario.Job,
		Subtitle:  fmt.Sprintf("%s · %s", r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Command),
		Sections:  []page.Section{r.scenarioSection(), r.machineSection()},
		Problems:  r.Problems(),
		HowToRead: howToRead,
	}
	rep.Tables = append(rep.Tables,
		statTable(fmt.Sprintf("Steady state, after the warm-up and before the fault: median (min–max) of %s", repeatsWord(groups)),
			groups, "throughput (rec/s)", "throughput_rps", "p50 (ms)", "latency_p50_ms", "p99 (ms)", "latency_p99_ms",
			"max (ms)", "latency_max_ms", "recovery point (ms)", "checkpoint_ms"),
		statTable("Recovery bill, ms: median (min–max); detect and acquire are modelled or measured (on worker processes) where marked", groups,
			r.modelledTitle(groups, "detect"), "detect_ms", r.modelledTitle(groups, "acquire"), "acquire_ms",
			"restore", "restore_ms", "reprocess", "reprocess_ms", "catch-up", "catch_up_ms", "recovered", "recovered_ms",
			"predicted catch-up", "predicted_catch_up_ms"),
		statTable("Re-read and sink: median (min–max)", groups,
			"restored (bytes)", "restore_bytes", "re-read (records)", "reprocessed_records",
			"duplicate rows", "duplicate_rows", "conflicting rows", "conflicting_rows", "lost records", "lost_records",
			"wall (ms)", "wall_ms"),
		r.runsTable())
	if len(r.Calibration) > 0 {
		t := page.Table{Caption: "Calibration: each contestant's unpaced capacity", Header: []string{"contestant", "records/s", "wall (ms)"}}
		for _, c := range r.Calibration {
			t.Rows = append(t.Rows, []string{c.Contestant, compact(c.RPS), num(c.WallMs)})
		}
		rep.Tables = append(rep.Tables, t)
	}
	for _, f := range figs {
		svg, err := os.ReadFile(f.SVG)
		if err != nil {
			return err
		}
		caption := f.Caption + " Files: " + filepath.Base(f.SVG) + ", " + filepath.Base(f.PNG) + "."
		rep.Figures = append(rep.Figures, page.Figure{Title: f.Title, Caption: caption, SVG: svg})
	}
	for i := range r.Runs {
		run := &r.Runs[i]
		ok, detail := run.Verdict()
		rep.Verdicts = append(rep.Verdicts, page.Verdict{Run: run.RunName(), OK: ok, Detail: detail})
	}
	return page.Write(path, rep)
}

var howToRead = []string{
	"Every contestant ran the same job on the same live input, paced by the wall clock, and lost a worker at the " +
		"same moment, moved in each repeat by a seeded offset within one recovery interval so that the repeats " +
		"sample the whole cycle between recovery points. Each figure is the median of the repeats, the min–max " +
		"beside it in brackets; — means no run measured it.",
	"Steady state is the window after the warm-up and before the fault. A recovery point is a checkpoint " +
		"(recordwise), a batch (microbatch) or a finite job (diskphase); its duration is the median before the fault.",
	"The recovery bill runs from the fault: detect (a modelled heartbeat timeout), acquire (a modelled wait for " +
		"a replacement worker), restore (loading the recovery point), then catch-up until the source lag is back " +
		"within 10 % of its level before the fault. Reprocess, the time spent re-reading input that had been read " +
		"before the crash, happens within catch-up. Recovered is the whole: fault to caught up.",
	"In the time-series figures, each panel is one contestant's repeat with the median time to recovered; the " +
		"shaded bands are the phases of the bill, the dashed line the fault. The lag figure shows the backlog: it " +
		"grows while a contestant is down and drains at the speed it has to spare above the input rate.",
	"Correctness: after every run the output is resolved (the newest version of every key) and compared with the " +
		"reference executor's. Duplicate and conflicting rows are what the destination saw on the way; they do not " +
		"make a run wrong unless the sink mode promises none.",
}

func repeatsWord(groups []*Group) string {
	n := 0
	for _, g := range groups {
		n = max(n, len(g.Runs))
	}
	if n == 1 {
		return "1 run"
	}
	return strconv.Itoa(n) + " repeats"
}

func (r *Results) modelledTitle(groups []*Group, part string) string {
	measured := false
	for _, g := range groups {
		measured = measured || g.Measured(part)
	}
	switch {
	case anyModelled(groups, part) && measured:
		return part + " (modelled, measured)"
	case anyModelled(groups, part):
		return part + " (modelled)"
	case measured:
		return part + " (measured)"
	}
	return part
}

// statTable is a table of groups × figures given as title, key pairs.
func statTable(caption string, groups []*Group, titleKeys ...string) page.Table {
	t := page.Table{Caption: caption, Header: []string{"contestant"}}
	// A figure no run measured (a prediction without a load sweep) gets
	// no column.
	var keys []string
	for i := 0; i+1 < len(titleKeys); i += 2 {
		for _, g := range groups {
			if g.Stat(titleKeys[i+1]).Measured() {
				t.Header = append(t.Header, titleKeys[i])
				keys = append(keys, titleKeys[i+1])
				break
			}
		}
	}
	for _, g := range groups {
		row := []string{g.Name()}
		for _, k := range keys {
			row = append(row, statCell(g.Stat(k)))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// runsTable lists every run in the order it ran.
func (r *Results) runsTable() page.Table {
	t := page.Table{Caption: "Every run, in the order they ran (interleaved)",
		Header: []string{"#", "run", "fault at (ms)", "points before fault", "steady state", "recovered (ms)", "wall (ms)", "verdict"}}
	runs := make([]*RunResult, len(r.Runs))
	for i := range r.Runs {
		runs[i] = &r.Runs[i]
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Seq < runs[j].Seq })
	for _, run := range runs {
		fault := notMeasuredCell
		if run.FaultAtMs != nil {
			fault = fmt.Sprintf("%.0f", *run.FaultAtMs)
		}
		if !run.FaultFired() {
			fault += " (never fired)"
		}
		rec := notMeasuredCell
		if run.Figures.RecoveredMs != nil {
			rec = fmt.Sprintf("%.0f", *run.Figures.RecoveredMs)
		}
		ok, detail := run.Verdict()
		verdict := "equal to the reference"
		switch {
		case !ok && run.Error != "":
			verdict = detail
		case !ok:
			verdict = strings.TrimSuffix("differs: "+detail, ": ")
		}
		t.Rows = append(t.Rows, []string{strconv.Itoa(run.Seq + 1), run.RunName(), fault, strconv.Itoa(run.PointsBeforeFault),
			yesNo(run.SteadyState), rec, fmt.Sprintf("%.0f", run.Figures.WallMs), verdict})
	}
	return t
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func (r *Results) scenarioSection() page.Section {
	s := r.Scenario
	var inputs []string
	for name, spec := range s.Inputs {
		inputs = append(inputs, name+" = "+spec)
	}
	sort.Strings(inputs)
	rows := []page.Row{
		{Key: "job", Value: s.Job},
		{Key: "inputs", Value: strings.Join(inputs, "; ")},
		{Key: "sink mode", Value: s.SinkMode},
		{Key: "parallelism", Value: strconv.Itoa(s.Parallelism)},
		{Key: "live input", Value: fmt.Sprintf("%s at %s records/s", seconds(s.DurationMs), num(s.Rate))},
		{Key: "warm-up (excluded)", Value: seconds(s.WarmupMs)},
		{Key: "recovery interval", Value: seconds(s.CadenceMs) + " (checkpoint interval, trigger, finite-job interval)"},
		{Key: "workers", Value: cmp.Or(s.Workers, "inproc")},
	}
	if s.Fault != "" {
		rows = append(rows,
			page.Row{Key: "fault", Value: fmt.Sprintf("%s, moved by a seeded 0–%s per repeat", s.Fault, seconds(s.JitterMs))},
			page.Row{Key: "detect delay (modelled)", Value: num(s.DetectDelayMs) + " ms"},
			page.Row{Key: "acquire delay (modelled)", Value: num(s.AcquireDelayMs) + " ms"})
	} else {
		rows = append(rows, page.Row{Key: "fault", Value: "none"})
	}
	rows = append(rows,
		page.Row{Key: "repeats", Value: strconv.Itoa(s.Repeat)},
		page.Row{Key: "seed", Value: strconv.FormatInt(s.Seed, 10)},
		page.Row{Key: "run order", Value: strings.Join(r.Order, ", ") + ", then again"})
	if s.Sweep != "" {
		rows = append(rows, page.Row{Key: "sweep", Value: s.Sweep + " = " + strings.Join(s.SweepPoints, ", ")})
	}
	return page.Section{Title: "Scenario", Rows: rows}
}

func (r *Results) machineSection() page.Section {
	m := r.Machine
	return page.Section{Title: "Machine", Rows: []page.Row{
		{Key: "cores", Value: fmt.Sprintf("%d (GOMAXPROCS %d)", m.CPUs, m.GOMAXPROCS)},
		{Key: "Go", Value: m.GoVersion},
		{Key: "OS / arch", Value: m.OS + " / " + m.Arch},
		{Key: "storage", Value: m.Storage},
		{Key: "CPU", Value: cmp.Or(m.CPUModel, "not known")},
		{Key: "load average at the start", Value: cmp.Or(m.LoadAverage, "not known")},
	}}
}
