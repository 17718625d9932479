package lineage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

func openGen(t testing.TB, spec string) source.Source {
	t.Helper()
	src, err := source.Open(spec, source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func buildJob(t testing.TB, name string) *job.Job {
	t.Helper()
	j, err := job.Build(name, job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// runSteps is the test's own "first run" of a piece, written apart from the
// package's chain so the comparison is not the code checking itself: every
// step gets a fresh instance, each input batch goes through all steps, and
// the last step's output is kept.
func runSteps(t testing.TB, j *job.Job, steps []Step, alloc memory.Allocator, in []arrow.RecordBatch) []arrow.RecordBatch {
	t.Helper()
	cur := make([]arrow.RecordBatch, len(in))
	for i, b := range in {
		b.Retain()
		cur[i] = b
	}
	for _, s := range steps {
		op, err := j.Stage(s.Stage).New()
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Open(operator.Context{Alloc: alloc, Parallelism: 1, KeyGroups: keygroup.All}); err != nil {
			t.Fatal(err)
		}
		var next []arrow.RecordBatch
		emit := operator.EmitFunc(func(b arrow.RecordBatch) error { b.Retain(); next = append(next, b); return nil })
		for _, b := range cur {
			if err := op.Process(0, b, emit); err != nil {
				t.Fatal(err)
			}
		}
		if err := op.Flush(emit); err != nil {
			t.Fatal(err)
		}
		op.Close()
		releaseAll(cur)
		cur = next
	}
	return cur
}

// rows flattens batches into rows of every column, nulls marked, so the
// comparison covers values, validity and order, not batch boundaries.
func rows(t testing.TB, bs []arrow.RecordBatch) (*arrow.Schema, []string) {
	t.Helper()
	var schema *arrow.Schema
	var out []string
	for _, b := range bs {
		if schema == nil {
			schema = b.Schema()
		} else if !schema.Equal(b.Schema()) {
			t.Fatalf("schema changed inside a piece: %s vs %s", schema, b.Schema())
		}
		for r := 0; r < int(b.NumRows()); r++ {
			var sb strings.Builder
			for c := 0; c < int(b.NumCols()); c++ {
				col := b.Column(c).(*array.Int64)
				if col.IsNull(r) {
					sb.WriteString("null,")
				} else {
					fmt.Fprintf(&sb, "%d,", col.Value(r))
				}
			}
			out = append(out, sb.String())
		}
	}
	return schema, out
}

func samePiece(t testing.TB, id PieceID, want, got []arrow.RecordBatch) {
	t.Helper()
	ws, wr := rows(t, want)
	gs, gr := rows(t, got)
	if ws != nil && gs != nil && !ws.Equal(gs) {
		t.Fatalf("piece %s: schema %s, want %s", id, gs, ws)
	}
	if len(wr) != len(gr) {
		t.Fatalf("piece %s: %d rows, want %d", id, len(gr), len(wr))
	}
	for i := range wr {
		if wr[i] != gr[i] {
			t.Fatalf("piece %s row %d: %s, want %s", id, i, gr[i], wr[i])
		}
	}
}

// firstRun plays an executor's first run: it reads each partition once,
// sequentially, in random batch sizes that stop at piece boundaries, cuts
// the partition into pieces at random boundaries, runs the steps over each
// piece, and records a derivation per piece on a worker chosen round-robin.
type firstRun struct {
	g      *Graph
	pieces map[PieceID][]arrow.RecordBatch
}

func (f *firstRun) release() {
	for _, bs := range f.pieces {
		releaseAll(bs)
	}
}

func runFirst(t testing.TB, rng *rand.Rand, j *job.Job, src source.Source, steps []Step, workers int, alloc memory.Allocator) *firstRun {
	return runFirstOf(t, rng, j, job.DefaultInput, src, steps, workers, alloc)
}

func runFirstOf(t testing.TB, rng *rand.Rand, j *job.Job, input string, src source.Source, steps []Step, workers int, alloc memory.Allocator) *firstRun {
	t.Helper()
	ctx := context.Background()
	f := &firstRun{g: NewGraph(), pieces: map[PieceID][]arrow.RecordBatch{}}
	n := 0
	for pi, name := range src.Partitions() {
		rd, err := src.Open(ctx, pi, source.Position{Partition: name}, alloc)
		if err != nil {
			t.Fatal(err)
		}
		var pos int64
		for eof := false; !eof; {
			// A piece of 0..3000 records; an empty piece is legal and must
			// rebuild to nothing.
			size := rng.Int64N(3001)
			start := pos
			var in []arrow.RecordBatch
			for pos < start+size {
				b, p, err := rd.Next(ctx, int(min(1+rng.Int64N(700), start+size-pos)))
				if errors.Is(err, io.EOF) {
					eof = true
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				pos = p.Offset
				in = append(in, b)
			}
			// The piece number keeps ids unique: an empty piece starts
			// where the next one does.
			d := Derivation{ID: PieceID(fmt.Sprintf("%s/%d#%d", name, start, n)), Worker: WorkerID(n % workers), Steps: steps,
				Input: &InputRange{Input: input, Partition: pi, Start: source.Position{Partition: name, Offset: start}, End: pos}}
			n++
			if err := f.g.Add(d); err != nil {
				t.Fatal(err)
			}
			f.pieces[d.ID] = runSteps(t, j, steps, alloc, in)
			releaseAll(in)
		}
		rd.Close()
	}
	return f
}

// TestRebuildIdentical: for every stateless step of the built-in jobs, a
// piece rebuilt from its derivation equals the piece the first run built:
// same schema, same rows, same order, compared value by value.
func TestRebuildIdentical(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0x6c696e65))
	cases := []struct {
		job   string
		steps []string
		input string // default job.DefaultInput
	}{
		{"etl", []string{"filter", "project"}, ""},
		{"etl", []string{"filter"}, ""},
		{"keyed-count", []string{"filter"}, ""},
		{"windowed-sum", []string{"filter"}, ""},
		{"etl", nil, ""}, // the raw input range itself
		// join's stateless stages are its two sources: raw ranges.
		{"join", nil, job.InputOrders},
		{"join", nil, job.InputPayments},
	}
	for _, tc := range cases {
		if tc.input == "" {
			tc.input = job.DefaultInput
		}
		t.Run(tc.job+"/"+tc.input+"/"+strings.Join(tc.steps, "+"), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			j := buildJob(t, tc.job)
			steps, err := StepsFor(j, tc.steps...)
			if err != nil {
				t.Fatal(err)
			}
			spec := fmt.Sprintf("gen:records=%d,keys=%d,partitions=%d,seed=%d,skew=%d,disorder=%d",
				5000+rng.IntN(20000), 1+rng.IntN(500), 1+rng.IntN(5), rng.Int64(), rng.IntN(2), rng.IntN(50))
			t.Logf("input %s", spec)
			src := openGen(t, spec)
			const workers = 4
			first := runFirstOf(t, rng, j, tc.input, src, steps, workers, mem)
			defer first.release()
			lost := WorkerID(rng.IntN(workers))
			var survivors []WorkerID
			for w := range WorkerID(workers) {
				if w != lost {
					survivors = append(survivors, w)
				}
			}
			var needed []PieceID
			for _, d := range first.g.Pieces() {
				needed = append(needed, d.ID)
			}
			plan, err := Plan(first.g, []WorkerID{lost}, needed, survivors)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Rebuild(context.Background(), plan, Env{Job: j, Sources: map[string]source.Source{tc.input: src},
				Alloc: mem, ReadRows: 1 + rng.IntN(5000)})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			var wantRead int64
			for _, id := range plan.Lost {
				d, _ := first.g.Piece(id)
				wantRead += d.Input.Records()
				samePiece(t, id, first.pieces[id], res.Pieces[id])
			}
			m := res.Loss
			if m.PiecesLost != len(plan.Lost) || m.PiecesRebuilt != len(plan.Lost) || m.RecordsReread != wantRead || len(res.Pieces) != len(plan.Lost) {
				t.Errorf("metrics %+v, want %d pieces, %d records", m, len(plan.Lost), wantRead)
			}
			t.Logf("lost worker %d: %d of %d pieces rebuilt, %d records re-read", lost, m.PiecesRebuilt, first.g.Len(), m.RecordsReread)
		})
	}
}

// TestRebuildThroughParents: etl's project step recorded as its own piece
// over filter pieces, part of them materialised; lose one worker and
// rebuild everything downstream still needs, fetching available parents.
func TestRebuildThroughParents(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	j := buildJob(t, "etl")
	src := openGen(t, fmt.Sprintf("gen:records=20000,keys=100,partitions=3,seed=%d", rng.Int64()))
	filterSteps, _ := StepsFor(j, "filter")
	projectSteps, _ := StepsFor(j, "project")
	const workers = 3
	first := runFirst(t, rng, j, src, filterSteps, workers, mem)
	defer first.release()
	// One project piece per pair of consecutive filter pieces, on a
	// random worker; a third of the filter pieces are materialised.
	parents := first.g.Pieces()
	var needed []PieceID
	for i := 0; i < len(parents); i += 2 {
		d := Derivation{ID: PieceID(fmt.Sprintf("proj/%d", i)), Worker: WorkerID(rng.IntN(workers)), Steps: projectSteps}
		var in []arrow.RecordBatch
		for _, p := range parents[i:min(i+2, len(parents))] {
			d.Parents = append(d.Parents, p.ID)
			in = append(in, first.pieces[p.ID]...)
		}
		if err := first.g.Add(d); err != nil {
			t.Fatal(err)
		}
		first.pieces[d.ID] = runSteps(t, j, projectSteps, mem, in)
		needed = append(needed, d.ID)
	}
	for _, p := range parents {
		if rng.IntN(3) == 0 {
			first.g.Materialise(p.ID)
		}
	}
	lost := WorkerID(0)
	plan, err := Plan(first.g, []WorkerID{lost}, needed, []WorkerID{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int64
	env := Env{Job: j, Sources: map[string]source.Source{job.DefaultInput: src}, Alloc: mem,
		Fetch: func(_ context.Context, id PieceID) ([]arrow.RecordBatch, error) {
			fetches.Add(1)
			bs := first.pieces[id]
			for _, b := range bs {
				b.Retain()
			}
			return bs, nil
		}}
	res, err := Rebuild(context.Background(), plan, env)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	for _, task := range plan.Tasks {
		samePiece(t, task.Piece.ID, first.pieces[task.Piece.ID], res.Pieces[task.Piece.ID])
	}
	if fetches.Load() != int64(len(plan.Fetch)) {
		t.Errorf("%d fetches, plan has %d", fetches.Load(), len(plan.Fetch))
	}
	t.Logf("%d tasks, %d fetched, metrics %+v", len(plan.Tasks), len(plan.Fetch), res.Loss)
}

// noise is a test-only stateless step that is not deterministic: it appends
// a column of random draws. Rebuilding it would give different bytes.
type noise struct {
	in, out *arrow.Schema
	alloc   memory.Allocator
}

func newNoise(in *arrow.Schema) *noise {
	fs := append(append([]arrow.Field(nil), in.Fields()...), arrow.Field{Name: "noise", Type: arrow.PrimitiveTypes.Int64})
	return &noise{in: in, out: arrow.NewSchema(fs, nil), alloc: memory.DefaultAllocator}
}

func (n *noise) Deterministic() bool                            { return false }
func (n *noise) OutputSchema() *arrow.Schema                    { return n.out }
func (n *noise) Open(ctx operator.Context) error                { n.alloc = ctx.Alloc; return nil }
func (n *noise) AdvanceWatermark(int64, operator.Emitter) error { return nil }
func (n *noise) Flush(operator.Emitter) error                   { return nil }
func (n *noise) Close() error                                   { return nil }
func (n *noise) Process(_ int, b arrow.RecordBatch, out operator.Emitter) error {
	arr, vals := operator.AllocInt64(n.alloc, int(b.NumRows()))
	for i := range vals {
		vals[i] = rand.Int64()
	}
	cols := append([]arrow.Array(nil), b.Columns()...)
	for _, c := range cols {
		c.Retain()
	}
	o := operator.NewBatchOwning(n.out, int(b.NumRows()), append(cols, arr)...)
	defer o.Release()
	return out.Emit(o)
}

func noiseJob(t testing.TB) *job.Job {
	etl := buildJob(t, "etl")
	src, filter := etl.Stage("source"), etl.Stage("filter")
	nz := &job.Stage{ID: "noise", Kind: job.OperatorStage, Stateless: true, Schema: newNoise(filter.Schema).out,
		New:    func() (operator.Operator, error) { return newNoise(filter.Schema), nil },
		Inputs: []job.Edge{{From: "filter", Exchange: job.Forward}}}
	snk := &job.Stage{ID: "sink", Kind: job.SinkStage, Schema: nz.Schema, Inputs: []job.Edge{{From: "noise"}}}
	j := &job.Job{Name: "noisy", Inputs: etl.Inputs, Stages: []*job.Stage{src, filter, nz, snk}}
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestNondeterministicRefused: a step that draws random numbers really
// would rebuild to different bytes, so it is refused by Plan (from the
// recorded flag) and by Rebuild (from the operator, even when a record
// claims otherwise).
func TestNondeterministicRefused(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	j := noiseJob(t)
	src := openGen(t, "gen:records=1000,partitions=1,seed=3")
	steps, err := StepsFor(j, "filter", "noise")
	if err != nil {
		t.Fatal(err)
	}
	if !steps[0].Deterministic || steps[1].Deterministic {
		t.Fatalf("steps %+v: want filter deterministic, noise not", steps)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	first := runFirst(t, rng, j, src, steps, 2, mem)
	defer first.release()
	var all []PieceID
	for _, d := range first.g.Pieces() {
		all = append(all, d.ID)
	}
	if _, err := Plan(first.g, []WorkerID{0}, all, []WorkerID{1}); !errors.Is(err, ErrNondeterministic) {
		t.Fatalf("Plan: err = %v, want ErrNondeterministic", err)
	} else {
		t.Logf("Plan refused: %v", err)
	}

	// A record that lies about the step is caught when the rebuild starts.
	lying := []Step{{Stage: "filter", Deterministic: true}, {Stage: "noise", Deterministic: true}}
	d, _ := first.g.Piece(all[0])
	d.Steps = lying
	plan := RebuildPlan{Tasks: []Task{{Piece: d, Worker: 1}}, Survivors: []WorkerID{1}}
	env := Env{Job: j, Sources: map[string]source.Source{job.DefaultInput: src}, Alloc: mem}
	if _, err := Rebuild(context.Background(), plan, env); !errors.Is(err, ErrNondeterministic) {
		t.Fatalf("Rebuild: err = %v, want ErrNondeterministic", err)
	} else {
		t.Logf("Rebuild refused: %v", err)
	}

	// Why: two runs of the same derivation differ.
	d.Steps = []Step{{Stage: "noise", Deterministic: true}}
	rd, err := src.Open(context.Background(), 0, source.Position{Partition: "p0"}, mem)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := rd.Next(context.Background(), 100)
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	a := runSteps(t, j, d.Steps, mem, []arrow.RecordBatch{in})
	b := runSteps(t, j, d.Steps, mem, []arrow.RecordBatch{in})
	in.Release()
	_, ra := rows(t, a)
	_, rb := rows(t, b)
	if len(ra) > 0 && strings.Join(ra, "|") == strings.Join(rb, "|") {
		t.Error("noise step gave the same bytes twice")
	}
	releaseAll(a)
	releaseAll(b)
}

// forgetful wraps a re-readable source and claims otherwise, standing in
// for a push feed (which would need a live connection here).
type forgetful struct{ source.Source }

func (forgetful) Rereadable() bool { return false }

func TestRebuildErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	j := buildJob(t, "etl")
	src := openGen(t, "gen:records=1000,partitions=2,seed=5")
	steps, _ := StepsFor(j, "filter", "project")
	piece := func(id string, part int, start, end int64) Derivation {
		return Derivation{ID: PieceID(id), Steps: steps, Input: &InputRange{Input: job.DefaultInput, Partition: part,
			Start: source.Position{Partition: fmt.Sprintf("p%d", part), Offset: start}, End: end}}
	}
	plan := func(ds ...Derivation) RebuildPlan {
		p := RebuildPlan{Survivors: []WorkerID{1, 2}}
		for i, d := range ds {
			p.Tasks = append(p.Tasks, Task{Piece: d, Worker: WorkerID(1 + i%2)})
		}
		return p
	}
	env := Env{Job: j, Sources: map[string]source.Source{job.DefaultInput: src}, Alloc: mem}
	cases := []struct {
		name string
		plan RebuildPlan
		env  Env
		want error
		msg  string
	}{
		{"forgetful input", plan(piece("a", 0, 0, 100)),
			Env{Job: j, Sources: map[string]source.Source{job.DefaultInput: forgetful{src}}, Alloc: mem}, source.ErrNotRereadable, ""},
		// The second piece fails after the first has rebuilt batches; those
		// must be released (the checked allocator ends at 0).
		{"range past the end of the input", plan(piece("a", 0, 0, 400), piece("b", 1, 400, 600)), env, nil, "ended at 500"},
		{"wrong partition name", plan(Derivation{ID: "a", Steps: steps, Input: &InputRange{Input: job.DefaultInput, Partition: 0,
			Start: source.Position{Partition: "p1"}, End: 5}}), env, nil, "does not have"},
		{"missing input", plan(Derivation{ID: "a", Steps: steps, Input: &InputRange{Input: "nope", Start: source.Position{Partition: "p0"}, End: 5}}), env, nil, "not given"},
		{"stateful step", plan(Derivation{ID: "a", Steps: []Step{{Stage: "sink", Deterministic: true}},
			Input: &InputRange{Input: job.DefaultInput, Start: source.Position{Partition: "p0"}, End: 5}}), env, nil, "not an operator stage"},
		{"parent neither rebuilt nor fetched", plan(Derivation{ID: "a", Steps: steps, Parents: ids("x")}), env, nil, "neither"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Rebuild(context.Background(), tc.plan, tc.env)
			if err == nil {
				res.Release()
				t.Fatal("no error")
			}
			if (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v / %q", err, tc.want, tc.msg)
			}
			t.Logf("%v", err)
		})
	}
	kc := buildJob(t, "keyed-count")
	if _, err := StepsFor(kc, "count"); err == nil || !strings.Contains(err.Error(), "keeps state") {
		t.Errorf("StepsFor(count) = %v, want a refusal of a stateful stage", err)
	}
}
