package reference

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// The reference executor writes the oracle's answer through the sink, and
// its summary says what a failure-free single-worker run is: parallelism
// 1, no run id.
func TestReferenceWritesTheOraclesAnswer(t *testing.T) {
	const spec = "gen:records=3000,keys=25,partitions=2,seed=3"
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cfg := run.Config{Job: "windowed-sum", Params: job.DefaultParams, Executor: Executor{}.Name(),
		Inputs: map[string]string{job.DefaultInput: spec}, Output: filepath.Join(t.TempDir(), "out"),
		OutputFormat: sink.CSV, SinkMode: sink.Append, Parallelism: 4, Seed: 1}
	env, err := run.Prepare(t.Context(), cfg, alloc, nil, false, run.OutputRequireEmpty)
	if err != nil {
		t.Fatal(err)
	}
	s, err := run.Execute(t.Context(), Executor{}, env)
	if cerr := env.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if s.RecordsIn != 3000 || s.Parallelism != 1 || s.RunID != nil || s.Barriers != nil {
		t.Fatalf("summary: %d records in, parallelism %d, run id %v, barriers %v; want 3000, 1, none, none",
			s.RecordsIn, s.Parallelism, s.RunID, s.Barriers)
	}
	got, _, err := sink.Resolve(cfg.Output, env.Job.Output)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(spec, source.Options{DefaultSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want, err := oracle.Evaluate(t.Context(), env.Job, map[string]source.Source{job.DefaultInput: src}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Table.Rows) == 0 {
		t.Fatal("the oracle's answer is empty: the test compares nothing")
	}
	if d := got.Diff(want.Table, 5); d != "" {
		t.Fatalf("the reference's output differs from the oracle's:\n%s", d)
	}
	if n := alloc.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes still allocated", n)
	}
}

// The reference is the failure-free oracle and has no settings of its own.
func TestReferenceTraits(t *testing.T) {
	tr := Executor{}.Traits()
	if !tr.Reference || len(tr.Flags) != 0 || len(tr.Variants.Values) != 0 || tr.NoOptions != nil || len(Executor{}.FailPoints()) != 0 {
		t.Fatalf("traits %+v, fail points %v; want the reference with no flags, variants, options or fail points", tr, Executor{}.FailPoints())
	}
}
