package bench

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Comparison puts two benchmarks side by side (rewind bench compare):
// each contestant × sweep point both ran, figure by figure.
type Comparison struct {
	Old, New *Results
	Pairs    []Pair
	// OnlyOld and OnlyNew name the groups only one side has.
	OnlyOld, OnlyNew []string
	// Differs lists how the two scenarios or machines differ, so that a
	// ratio is not read as the effect of a change when the set-up moved.
	Differs []string
}

// Pair is one contestant × sweep point in both benchmarks.
type Pair struct{ Old, New *Group }

// ErrNothingInCommon is returned when the two benchmarks share no
// contestant × sweep point.
var ErrNothingInCommon = errors.New("no contestant (at the same sweep point) is in both benchmarks")

// Compare pairs old's and new's groups by contestant and sweep point.
func Compare(old, new *Results) (*Comparison, error) {
	c := &Comparison{Old: old, New: new}
	oldGroups, newGroups := old.Aggregate(), new.Aggregate()
	byName := map[string]*Group{}
	for _, g := range newGroups {
		byName[g.Name()] = g
	}
	inOld := map[string]bool{}
	for _, g := range oldGroups {
		inOld[g.Name()] = true
		if n := byName[g.Name()]; n != nil {
			c.Pairs = append(c.Pairs, Pair{Old: g, New: n})
		} else {
			c.OnlyOld = append(c.OnlyOld, g.Name())
		}
	}
	for _, g := range newGroups {
		if !inOld[g.Name()] {
			c.OnlyNew = append(c.OnlyNew, g.Name())
		}
	}
	if len(c.Pairs) == 0 {
		return nil, fmt.Errorf("%w: OLD has %s; NEW has %s", ErrNothingInCommon, listOr(c.OnlyOld), listOr(c.OnlyNew))
	}
	c.Differs = setupDiffers(old, new)
	return c, nil
}

func listOr(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// setupDiffers lists the scenario and machine settings that differ.
func setupDiffers(a, b *Results) []string {
	var out []string
	diff := func(name, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %s → %s", name, x, y))
		}
	}
	sa, sb := a.Scenario, b.Scenario
	diff("job", sa.Job, sb.Job)
	diff("sink mode", sa.SinkMode, sb.SinkMode)
	diff("parallelism", strconv.Itoa(sa.Parallelism), strconv.Itoa(sb.Parallelism))
	diff("duration", seconds(sa.DurationMs), seconds(sb.DurationMs))
	diff("warm-up", seconds(sa.WarmupMs), seconds(sb.WarmupMs))
	diff("rate", num(sa.Rate), num(sb.Rate))
	diff("interval", seconds(sa.CadenceMs), seconds(sb.CadenceMs))
	diff("fault", orNone(sa.Fault), orNone(sb.Fault))
	diff("jitter", seconds(sa.JitterMs), seconds(sb.JitterMs))
	diff("detect delay", num(sa.DetectDelayMs)+"ms", num(sb.DetectDelayMs)+"ms")
	diff("acquire delay", num(sa.AcquireDelayMs)+"ms", num(sb.AcquireDelayMs)+"ms")
	diff("repeats", strconv.Itoa(sa.Repeat), strconv.Itoa(sb.Repeat))
	diff("seed", strconv.FormatInt(sa.Seed, 10), strconv.FormatInt(sb.Seed, 10))
	diff("sweep", orNone(sa.Sweep), orNone(sb.Sweep))
	ma, mb := a.Machine, b.Machine
	diff("cores", strconv.Itoa(ma.CPUs), strconv.Itoa(mb.CPUs))
	diff("GOMAXPROCS", strconv.Itoa(ma.GOMAXPROCS), strconv.Itoa(mb.GOMAXPROCS))
	diff("Go", ma.GoVersion, mb.GoVersion)
	diff("storage", ma.Storage, mb.Storage)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ratio is NEW/OLD of two medians: "—" when either is missing or OLD is
// zero (and NEW is not), "1.00" when both are zero.
func ratio(o, n Stat) string {
	switch {
	case !o.Measured() || !n.Measured():
		return notMeasuredCell
	case o.Median == 0 && n.Median == 0:
		return "1.00"
	case o.Median == 0:
		return notMeasuredCell
	}
	return fmt.Sprintf("%.2f", n.Median/o.Median)
}

// WriteText writes the comparison, no line wider than TableWidth: what
// differs in the set-up, then per contestant every figure either side
// measured, OLD and NEW as median (min–max), and NEW/OLD.
func (c *Comparison) WriteText(w io.Writer, oldName, newName string) error {
	var b strings.Builder
	line := func(text, indent string) {
		for _, l := range wrap(text, TableWidth, indent) {
			b.WriteString(l + "\n")
		}
	}
	line(fmt.Sprintf("rewind bench compare: OLD %s (%s), NEW %s (%s); NEW/OLD is the ratio of the medians.",
		oldName, c.Old.Started.UTC().Format("2006-01-02 15:04"), newName, c.New.Started.UTC().Format("2006-01-02 15:04")), "  ")
	if len(c.Differs) > 0 {
		line("Set-up differs: "+strings.Join(c.Differs, "; ")+".", "  ")
	} else {
		line("Same scenario and machine.", "  ")
	}
	if len(c.OnlyOld) > 0 {
		line("Only in OLD: "+strings.Join(c.OnlyOld, ", ")+".", "  ")
	}
	if len(c.OnlyNew) > 0 {
		line("Only in NEW: "+strings.Join(c.OnlyNew, ", ")+".", "  ")
	}
	for _, p := range c.Pairs {
		b.WriteString("\n")
		line(fmt.Sprintf("%s: OLD %d of %d runs correct, NEW %d of %d", p.Old.Name(),
			p.Old.Correct(), len(p.Old.Runs), p.New.Correct(), len(p.New.Runs)), "  ")
		rows := [][]string{{"figure", "unit", "OLD", "NEW", "NEW/OLD"}}
		for _, m := range Metrics {
			o, n := p.Old.Stat(m.Key), p.New.Stat(m.Key)
			if !o.Measured() && !n.Measured() {
				continue
			}
			label := m.Label
			if p.Old.Modelled(m.Label) || p.New.Modelled(m.Label) {
				label += "*"
			}
			rows = append(rows, []string{label, m.Unit, statCell(o), statCell(n), ratio(o, n)})
		}
		writeRows(&b, rows)
	}
	if anyPairModelled(c.Pairs) {
		b.WriteString("\n* modelled: a configured delay, not measured.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func anyPairModelled(pairs []Pair) bool {
	for _, p := range pairs {
		for _, part := range []string{"detect", "acquire"} {
			if p.Old.Modelled(part) || p.New.Modelled(part) {
				return true
			}
		}
	}
	return false
}

// writeRows writes rows as columns, indented, the first two left-aligned
// and the figures right-aligned.
func writeRows(b *strings.Builder, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for j, c := range r {
			widths[j] = max(widths[j], width(c))
		}
	}
	for _, r := range rows {
		var l strings.Builder
		l.WriteString("  ")
		for j, c := range r {
			if j > 0 {
				l.WriteString("  ")
			}
			l.WriteString(pad(c, widths[j], j >= 2))
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
}
