package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// references runs `--executor reference` once per (job, inputs, job
// parameters) and keeps its resolved output.
type references struct {
	bin, dir string
	mu       sync.Mutex
	byKey    map[string]*reference
}

type reference struct {
	once  sync.Once
	table *sink.Table
	err   error
}

func newReferences(bin, dir string) *references {
	return &references{bin: bin, dir: dir, byKey: map[string]*reference{}}
}

// ReferenceArgs are the reference run's arguments for s, writing out.
func ReferenceArgs(s *Schedule, out string) []string {
	args := []string{"run", "--executor", "reference", "--job", s.Job, "--output", out, "--output-format", "csv",
		"--summary", "json", "--progress", "none"}
	for _, in := range s.Inputs {
		args = append(args, "--input", in)
	}
	return append(args, s.Params...)
}

func (r *references) get(ctx context.Context, s *Schedule, layout sink.Layout) (*sink.Table, error) {
	key := s.Job + " " + strings.Join(s.Inputs, " ") + " " + strings.Join(s.Params, " ")
	r.mu.Lock()
	ref := r.byKey[key]
	if ref == nil {
		ref = &reference{}
		r.byKey[key] = ref
	}
	n := len(r.byKey)
	r.mu.Unlock()
	ref.once.Do(func() {
		out := filepath.Join(r.dir, fmt.Sprintf("ref-%d", n))
		p := startProc(ctx, r.bin, nil, ReferenceArgs(s, out), 0, 2*time.Minute)
		if p.Exit != 0 {
			ref.err = fmt.Errorf("reference run %s: exit %d: %s", strings.Join(p.Args, " "), p.Exit, p.FirstLine())
			return
		}
		ref.table, _, ref.err = sink.Resolve(out, layout)
		os.RemoveAll(out)
	})
	return ref.table, ref.err
}

// CheckOutput says how the output in out breaks what the run promised, or
// "": it resolves to want; the summary's duplicates are those of resolving,
// and so are those of an independent count of the visible files; an
// idempotent or transactional sink shows no duplicate or conflicting row
// (an append sink may show both: a replay over partitions read in another
// interleaving can give a key's version other values);
// no record was lost. sum may be nil: a run killed after it finished
// printed none.
func CheckOutput(sum *Summary, out string, mode sink.Mode, format sink.Format, layout sink.Layout, want *sink.Table) string {
	got, stats, err := sink.Resolve(out, layout)
	if err != nil {
		return "the output cannot be read back: " + err.Error()
	}
	if d := got.Diff(want, 3); d != "" {
		return fmt.Sprintf("the resolved output (%d rows) differs from the reference's (%d rows): %s", len(got.Rows), len(want.Rows), oneLine(d))
	}
	if sum != nil && (sum.SinkDuplicateRows != stats.DuplicateRows || sum.SinkConflicting != stats.ConflictingRows) {
		return fmt.Sprintf("the summary says %d duplicate and %d conflicting rows, resolving the output counts %d and %d",
			sum.SinkDuplicateRows, sum.SinkConflicting, stats.DuplicateRows, stats.ConflictingRows)
	}
	dups, conflicts, err := independentDuplicates(out, format, layout)
	if err != nil {
		return "the independent duplicate count cannot read the output: " + err.Error()
	}
	if dups != stats.DuplicateRows || conflicts != stats.ConflictingRows {
		return fmt.Sprintf("resolving counts %d duplicate and %d conflicting rows, the independent count %d and %d",
			stats.DuplicateRows, stats.ConflictingRows, dups, conflicts)
	}
	if mode != sink.Append && (stats.DuplicateRows != 0 || stats.ConflictingRows != 0) {
		return fmt.Sprintf("%s sink shows %d duplicate and %d conflicting rows", mode, stats.DuplicateRows, stats.ConflictingRows)
	}
	if sum != nil && sum.LostRecords != 0 {
		return fmt.Sprintf("%d records lost from a re-readable input", sum.LostRecords)
	}
	return ""
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// layoutOf is the output layout of a job (parameters do not change it).
func layoutOf(name string) (sink.Layout, error) {
	j, err := job.Build(name, job.DefaultParams)
	if err != nil {
		return sink.Layout{}, err
	}
	return j.Output, nil
}

// fatalTB lets runtest.IndependentDuplicates, written for tests, report
// to the campaign: its Fatal becomes an error.
type fatalTB struct{ testing.TB }

type tbFatal struct{ msg string }

func (fatalTB) Helper()                   {}
func (fatalTB) Fatal(args ...any)         { panic(tbFatal{fmt.Sprint(args...)}) }
func (fatalTB) Fatalf(f string, a ...any) { panic(tbFatal{fmt.Sprintf(f, a...)}) }

func independentDuplicates(out string, format sink.Format, layout sink.Layout) (dups, conflicts int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(tbFatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", f.msg)
		}
	}()
	dups, conflicts = runtest.IndependentDuplicates(fatalTB{}, out, format, layout)
	return dups, conflicts, nil
}
