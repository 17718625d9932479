package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime/diagram"
)

// A lesson is one `rewind trace --teach` mode: a classic mistake run
// beside the right way on the same input. Each lives in its own
// teach_<name>.go and adds itself with addLesson.
type lesson struct {
	name mistake.Name
	// brief says in one line what goes wrong (the list shows it).
	brief string
	// why says in two or three sentences why; printed after the result.
	why string
	// teach runs the wrong variant and the right one and says what each
	// got and whether the wrong one differs from the reference in exactly
	// the way the mistake's log (mistake.Plan.Steps) predicted.
	teach func(c *classroom) (*verdict, error)
}

// sawVerdict, when set (by tests), sees each verdict while the lesson's
// runs are still on disk.
var sawVerdict func(*verdict)

// lessons are the teach modes by name.
var lessons = map[mistake.Name]lesson{}

func addLesson(l lesson) {
	if _, dup := lessons[l.name]; dup {
		panic("two lessons named " + string(l.name))
	}
	lessons[l.name] = l
}

// lessonNames are the lessons there are, in mistake.All's order.
func lessonNames() []string {
	var out []string
	for _, n := range mistake.All {
		if _, ok := lessons[n]; ok {
			out = append(out, string(n))
		}
	}
	return out
}

// verdict is what a lesson found.
type verdict struct {
	// wrong and right are the two runs (right may be nil when the right
	// variant is the reference itself).
	wrong, right *traced
	// wrongGot and rightGot say in a line each what the runs got ("key 3
	// counted 14, 2 more than it has records").
	wrongGot, rightGot string
	// predicted is the difference the mistake's log predicts, observed the
	// one found between the wrong result and the reference; they read
	// alike when the lesson holds.
	predicted, observed string
	// holds: observed is exactly predicted, and the right run equals the
	// reference.
	holds bool
}

// classroom is what a lesson runs in: trace's flags, a scratch directory
// and a logger.
type classroom struct {
	ctx   context.Context
	f     *runFlags
	fl    *pflag.FlagSet
	dir   string
	log   *slog.Logger
	label int // runs so far, for their directories
	// fails are the crashes --fail asked for (none: the lesson's default).
	fails []fault.Spec
}

// executorFor is the executor a lesson about n runs on: --executor when
// given (refused unless it can make n), else the first executor in the
// registry that lists n in its Traits.Mistakes.
func (c *classroom) executorFor(n mistake.Name) (run.Executor, error) {
	can := func(e run.Executor) bool { return slices.Contains(e.Traits().Mistakes, n) }
	if c.fl.Changed("executor") {
		e := executors[c.f.executor]
		if e == nil || !can(e) {
			return nil, usagef("invalid --executor %q for --teach %s: the mistake is made by %s", c.f.executor, n, strings.Join(c.makers(n), ", "))
		}
		return e, nil
	}
	for _, e := range registry {
		if can(e) {
			return e, nil
		}
	}
	return nil, fmt.Errorf("--teach %s: no executor lists it in its Traits.Mistakes", n)
}

func (c *classroom) makers(n mistake.Name) []string {
	var out []string
	for _, e := range registry {
		if slices.Contains(e.Traits().Mistakes, n) {
			out = append(out, e.Name())
		}
	}
	return out
}

// defaultExecutor is the executor a lesson whose mistake is made outside
// the executors runs on (--executor when given).
func (c *classroom) defaultExecutor() run.Executor {
	if e := executors[c.f.executor]; e != nil && !e.Traits().Reference {
		return e
	}
	return executors[defaultExecutor]
}

// config is trace's config for exec from the flags (trace's tiny input
// unless --input was given), with its own output and storage directories
// in the classroom, and no crash: the lesson sets cfg.Fails.
func (c *classroom) config(exec run.Executor) (run.Config, error) {
	c.label++
	base := filepath.Join(c.dir, fmt.Sprintf("%02d-%s", c.label, exec.Name()))
	c.f.output = filepath.Join(base, "out")
	if err := checkExecutorFlags(c.fl, exec.Name()); err != nil {
		return run.Config{}, err
	}
	cfg, _, err := c.f.config(exec)
	if err != nil {
		return cfg, err
	}
	if len(c.f.inputs) == 0 {
		cfg.Inputs = traceInputs(cfg.Job, cfg.Seed)
	}
	if !c.fl.Changed("storage") {
		cfg.Storage = "file://" + filepath.Join(base, "storage")
	}
	c.fails, cfg.Fails = cfg.Fails, nil
	return cfg, nil
}

// run runs cfg on exec making plan's mistake (nil: none), records its
// diagram, and resolves its output.
func (c *classroom) run(exec run.Executor, cfg run.Config, plan *mistake.Plan) (*traced, error) {
	return runTraced(c.ctx, exec, cfg, plan, nil, c.log)
}

// crash is the crash the lesson's runs of exec on cfg take: --fail's, or
// trace's default (half-way through ref's input, after the first durable
// recovery point). A lesson about a crash refuses --fail none.
func (c *classroom) crash(exec run.Executor, cfg run.Config, ref *traced) ([]fault.Spec, error) {
	if c.f.noFails {
		return nil, usagef("invalid --fail none for --teach: the lesson needs a crash")
	}
	if len(c.fails) > 0 {
		return c.fails, nil
	}
	return traceCrash(exec, cfg, ref.summary.RecordsIn)
}

// reference is the reference executor's result on cfg's input.
func (c *classroom) reference(cfg run.Config) (*traced, error) {
	ref := referenceExecutor()
	cfg.Executor, cfg.Options, cfg.Fails = ref.Name(), nil, nil
	cfg.Output = filepath.Join(c.dir, fmt.Sprintf("%02d-%s", c.label, ref.Name()))
	return runTraced(c.ctx, ref, cfg, nil, nil, c.log)
}

// inputRecord is one input record, for the predictions that name records.
type inputRecord struct {
	Partition       int
	Offset          int64
	ID, Key, Value  int64
	EventTimeMillis int64
}

// records are the records at offsets [from, to) of partition p of cfg's
// input name, read again from the source (every lesson's input is
// re-readable). A paced input is read on a clock that moves only when
// the pacing waits, so reading it again takes no time.
func (c *classroom) records(cfg run.Config, input string, p int, from, to int64) ([]inputRecord, error) {
	spec, ok := cfg.Inputs[input]
	if !ok {
		return nil, fmt.Errorf("the job has no input %q", input)
	}
	now := time.Unix(0, 0)
	src, err := source.Open(spec, source.Options{Now: func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil }})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if p < 0 || p >= len(src.Partitions()) {
		return nil, fmt.Errorf("input %s has no partition %d", input, p)
	}
	rd, err := src.Open(c.ctx, p, source.Position{Partition: src.Partitions()[p], Offset: from}, memory.NewGoAllocator())
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []inputRecord
	for off := from; off < to; {
		b, _, err := rd.Next(c.ctx, int(to-off))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		cols := make([]*array.Int64, 4)
		for i := range cols {
			cols[i] = b.Column(i).(*array.Int64)
		}
		for i := 0; i < int(b.NumRows()); i++ {
			out = append(out, inputRecord{Partition: p, Offset: off, ID: cols[source.IdxID].Value(i), Key: cols[source.IdxKey].Value(i),
				Value: cols[source.IdxValue].Value(i), EventTimeMillis: cols[source.IdxTS].Value(i)})
			off++
		}
		b.Release()
	}
	return out, nil
}

// teach runs the lesson --teach names ("list": says what there is).
func (f *runFlags) teach(ctx context.Context, fl *pflag.FlagSet, name string, to traceOutput, stdout, stderr io.Writer) error {
	if name == "list" {
		for _, n := range lessonNames() {
			fmt.Fprintf(stdout, "%-22s %s\n", n, lessons[mistake.Name(n)].brief)
		}
		return nil
	}
	l, ok := lessons[mistake.Name(name)]
	if !ok {
		return usagef("invalid --teach %q: allowed are list, %s", name, strings.Join(lessonNames(), ", "))
	}
	dir, err := os.MkdirTemp("", "rewind-teach-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	c := &classroom{ctx: ctx, f: f, fl: fl, dir: dir, log: traceLogger(f.verbose, stderr)}
	v, err := l.teach(c)
	if err != nil {
		return err
	}
	if sawVerdict != nil {
		sawVerdict(v)
	}
	if err := to.writeLesson(l, v, stdout, stderr); err != nil {
		return err
	}
	if !v.holds {
		return fmt.Errorf("--teach %s: the lesson did not hold: predicted %s, observed %s", name, v.predicted, v.observed)
	}
	return nil
}

// writeLesson writes what the lesson found: text (the two results, the
// predicted and observed difference, why), json (that and both runs'
// events), svg or html (the wrong run's diagram, the lesson as caption).
func (to traceOutput) writeLesson(l lesson, v *verdict, stdout, stderr io.Writer) error {
	var b strings.Builder
	line := func(s string) { b.WriteString(fitLine(s, traceWidth)) }
	var err error
	switch to.format {
	case "text", "log":
		line(fmt.Sprintf("teach %s: %s", l.name, l.brief))
		if v.wrong != nil {
			line("input: " + strings.Join(sortedSpecs(v.wrong.cfg.Inputs), " "))
			if len(v.wrong.cfg.Fails) > 0 {
				line("crash: " + traceStory{cfg: v.wrong.cfg}.crashes())
			}
		}
		b.WriteString("\n")
		line("wrong:     " + v.wrongGot)
		line("right:     " + v.rightGot)
		line("predicted: " + v.predicted)
		verdict := "as predicted"
		if !v.holds {
			verdict = "NOT as predicted"
		}
		line("observed:  " + v.observed + " (" + verdict + ")")
		b.WriteString("\n")
		line("why: " + l.why)
	case "json":
		err = writeLessonJSON(&b, l, v)
	case "svg", "html":
		if v.wrong == nil {
			return fmt.Errorf("--teach %s draws no diagram", l.name)
		}
		title := fmt.Sprintf("teach %s: the wrong variant (%s)", l.name, v.wrong.exec.Name())
		var sb strings.Builder
		if to.format == "svg" {
			err = diagram.SVG(&sb, v.wrong.rec, diagram.SVGOptions{Title: title})
		} else {
			caption := fmt.Sprintf("%s. Wrong: %s. Right: %s. Predicted: %s. Observed: %s. %s", l.brief, v.wrongGot, v.rightGot, v.predicted, v.observed, l.why)
			err = diagram.HTML(&sb, v.wrong.rec, diagram.HTMLOptions{SVG: diagram.SVGOptions{Title: title}, Caption: caption})
		}
		b.WriteString(sb.String())
	}
	if err != nil {
		return fmt.Errorf("writing the lesson: %w", err)
	}
	return to.put(b.String(), stdout, stderr)
}

func writeLessonJSON(w io.Writer, l lesson, v *verdict) error {
	type runJSON struct {
		Executor string         `json:"executor"`
		Steps    []mistake.Step `json:"mistake_steps,omitempty"`
		// Events is the run's diagram as trace --format json writes it
		// (times in microseconds, lower-case fields).
		Events json.RawMessage `json:"trace"`
	}
	out := struct {
		Teach     mistake.Name `json:"teach"`
		Brief     string       `json:"brief"`
		Why       string       `json:"why"`
		Wrong     string       `json:"wrong"`
		Right     string       `json:"right"`
		Predicted string       `json:"predicted"`
		Observed  string       `json:"observed"`
		Holds     bool         `json:"holds"`
		WrongRun  *runJSON     `json:"wrong_run,omitempty"`
		RightRun  *runJSON     `json:"right_run,omitempty"`
	}{Teach: l.name, Brief: l.brief, Why: l.why, Wrong: v.wrongGot, Right: v.rightGot, Predicted: v.predicted, Observed: v.observed, Holds: v.holds}
	for _, r := range []struct {
		t   *traced
		dst **runJSON
	}{{v.wrong, &out.WrongRun}, {v.right, &out.RightRun}} {
		if r.t != nil {
			var rec bytes.Buffer
			if err := diagram.WriteJSON(&rec, r.t.rec); err != nil {
				return err
			}
			*r.dst = &runJSON{Executor: r.t.exec.Name(), Steps: r.t.steps, Events: rec.Bytes()}
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
