package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/spacetime/diagram"
)

// traceWidth is the widest line of trace's default text output.
const traceWidth = 80

// traceOutput is where trace writes, and in which format.
type traceOutput struct {
	format string
	path   string // "" = stdout
}

// traceStory is what one trace run has to tell.
type traceStory struct {
	cfg      run.Config
	exec     run.Executor
	summary  *report.Summary
	rec      diagram.Recording
	timeline *report.Timeline
	rows     int    // rows of the result, when it equals the reference's
	diff     string // how it differs, when it does not
}

func (to traceOutput) write(st traceStory, stdout, stderr io.Writer) error {
	var b bytes.Buffer
	var err error
	switch to.format {
	case "text":
		err = st.writeText(&b, to.path == "" && colourTerminal(stdout))
	case "log":
		err = st.writeLog(&b)
	case "svg":
		err = diagram.SVG(&b, st.rec, diagram.SVGOptions{Title: st.title()})
	case "html":
		err = diagram.HTML(&b, st.rec, diagram.HTMLOptions{SVG: diagram.SVGOptions{Title: st.title()}, Caption: st.caption()})
	case "json":
		err = diagram.WriteJSON(&b, st.rec)
	}
	if err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	return to.put(b.String(), stdout, stderr)
}

// put writes text to the --out file (saying so on stderr) or to stdout.
func (to traceOutput) put(text string, stdout, stderr io.Writer) error {
	if to.path == "" {
		_, err := io.WriteString(stdout, text)
		return err
	}
	if err := os.WriteFile(to.path, []byte(text), 0o644); err != nil {
		return fmt.Errorf("writing the trace: %w", err)
	}
	fmt.Fprintf(stderr, "rewind: wrote the %s trace to %s\n", to.format, to.path)
	return nil
}

// colourTerminal: colour only on a terminal that shows it, and never when
// NO_COLOR is set.
func colourTerminal(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set || os.Getenv("TERM") == "dumb" {
		return false
	}
	return isTerminal(w)
}

// title names the run in one line.
func (st traceStory) title() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s", st.cfg.Job, st.exec.Name())
	if v := st.exec.Traits().Variants; len(v.Values) > 0 && st.cfg.Options != nil {
		fmt.Fprintf(&b, " (%s %s)", st.cfg.Options.Variant(), v.Flag)
	}
	fmt.Fprintf(&b, ", parallelism %d", st.cfg.Parallelism)
	return b.String()
}

func (st traceStory) crashes() string {
	parts := make([]string, len(st.cfg.Fails))
	for i, sp := range st.cfg.Fails {
		parts[i] = sp.String()
	}
	return strings.Join(parts, ", ")
}

func (st traceStory) result() string {
	if st.diff != "" {
		return "result: DIFFERS from the reference executor's"
	}
	return fmt.Sprintf("result: equals the reference executor's (%d rows)", st.rows)
}

// caption says in two sentences what the HTML page's drawing shows.
func (st traceStory) caption() string {
	c := fmt.Sprintf("%s: input %s.", st.title(), strings.Join(sortedSpecs(st.cfg.Inputs), " "))
	if len(st.cfg.Fails) > 0 {
		c += " Crash: " + st.crashes() + "."
	}
	return c + " " + strings.TrimPrefix(st.result(), "result: ") + ". Hover over a mark for its details."
}

// writeText: the header, the lanes folded to 80 columns, the key moments,
// the run's bill, the result; no line wider than traceWidth.
func (st traceStory) writeText(w io.Writer, colour bool) error {
	var b strings.Builder
	line := func(s string) { b.WriteString(fitLine(s, traceWidth)) }
	line("trace: " + st.title())
	line("input: " + strings.Join(sortedSpecs(st.cfg.Inputs), " "))
	if len(st.cfg.Fails) > 0 {
		line("crash: " + st.crashes())
	}
	b.WriteString("\n")
	if len(st.rec.Events) == 0 {
		line("(no time-space events recorded; --format log shows the progress events)")
	} else {
		if err := diagram.Text(&b, st.rec, diagram.TextOptions{Width: traceWidth, Colour: colour}); err != nil {
			return err
		}
		b.WriteString("\n")
		if err := diagram.Moments(&b, st.rec, traceWidth); err != nil {
			return err
		}
	}
	b.WriteString("\n")
	var sum strings.Builder
	if err := st.summary.WriteText(&sum); err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimRight(unpointSummary(sum.String()), "\n"), "\n") {
		line(l)
	}
	line(st.result())
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLog: the progress events as a timeline, then the summary, as trace
// wrote before it drew.
func (st traceStory) writeLog(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "trace: %s, input %s\n", st.title(), strings.Join(sortedSpecs(st.cfg.Inputs), " "))
	if len(st.cfg.Fails) > 0 {
		fmt.Fprintf(&b, "crash: %s\n", st.crashes())
	}
	b.WriteString("\n")
	for _, ev := range st.timeline.Events() {
		b.WriteString(describeEvent(ev))
	}
	b.WriteString("\n")
	var sum strings.Builder
	if err := st.summary.WriteText(&sum); err != nil {
		return err
	}
	b.WriteString(unpointSummary(sum.String()))
	b.WriteString(st.result() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// summaryPointer is the summary's aside about a flag of rewind run that
// trace does not have.
var summaryPointer = regexp.MustCompile(` ?\([^()]*--summary[^()]*\)`)

func unpointSummary(s string) string { return summaryPointer.ReplaceAllString(s, "") }

// fitLine ends s with a newline, folding it at spaces into lines of at most
// width runes, the continuations indented; a word longer than a line is
// cut.
func fitLine(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s + "\n"
	}
	indent := "      "
	if t := strings.TrimLeft(s, " "); len(s)-len(t) >= 2 {
		indent = s[:len(s)-len(t)] + "    "
	}
	if len(indent) > width/2 {
		indent = "    "
	}
	var b strings.Builder
	cur := ""
	flush := func() {
		b.WriteString(cur + "\n")
		cur = indent
	}
	for i, word := range strings.Split(s, " ") {
		switch {
		case i == 0:
			cur = word
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= width:
			cur += " " + word
		default:
			flush()
			cur += word
		}
		for utf8.RuneCountInString(cur) > width {
			r := []rune(cur)
			b.WriteString(string(r[:width]) + "\n")
			cur = indent + string(r[width:])
		}
	}
	b.WriteString(cur + "\n")
	return b.String()
}
