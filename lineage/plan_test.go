package lineage

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/source"
)

var det = []Step{{Stage: "filter", Deterministic: true}}

func srcPiece(id string, w WorkerID, records int64) Derivation {
	return Derivation{ID: PieceID(id), Worker: w, Steps: det,
		Input: &InputRange{Input: "in", Partition: 0, Start: source.Position{Partition: "p0"}, End: records}}
}

func derived(id string, w WorkerID, parents ...string) Derivation {
	d := Derivation{ID: PieceID(id), Worker: w, Steps: []Step{{Stage: "project", Deterministic: true}}}
	for _, p := range parents {
		d.Parents = append(d.Parents, PieceID(p))
	}
	return d
}

func materialised(d Derivation) Derivation { d.Materialised = true; return d }

func nondet(d Derivation) Derivation {
	d.Steps = append(append([]Step(nil), d.Steps...), Step{Stage: "noise"})
	return d
}

func graphOf(t testing.TB, ds ...Derivation) *Graph {
	t.Helper()
	g := NewGraph()
	for _, d := range ds {
		if err := g.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

func ids(ss ...string) []PieceID {
	out := []PieceID{}
	for _, s := range ss {
		out = append(out, PieceID(s))
	}
	return out
}

func taskIDs(p RebuildPlan) []PieceID {
	out := []PieceID{}
	for _, t := range p.Tasks {
		out = append(out, t.Piece.ID)
	}
	return out
}

func TestPlan(t *testing.T) {
	chain := []Derivation{srcPiece("s", 1, 10), derived("a", 1, "s"), derived("b", 1, "a")}
	// Diamond: s feeds l and r, which both feed j.
	diamond := []Derivation{srcPiece("s", 1, 10), derived("l", 2, "s"), derived("r", 3, "s"), derived("j", 1, "l", "r")}
	cases := []struct {
		name       string
		pieces     []Derivation
		lost       []WorkerID
		needed     []PieceID
		survivors  []WorkerID
		wantLost   []PieceID
		wantTasks  []PieceID
		wantFetch  []PieceID
		wantErr    error
		wantErrAny bool
	}{
		{name: "nothing lost", pieces: chain, lost: []WorkerID{9}, needed: ids("b"), survivors: []WorkerID{1},
			wantLost: ids(), wantTasks: ids()},
		{name: "nothing lost, no survivors needed", pieces: chain, lost: nil, needed: ids("b"), survivors: nil,
			wantLost: ids(), wantTasks: ids()},
		{name: "chain back to the input", pieces: chain, lost: []WorkerID{1}, needed: ids("b"), survivors: []WorkerID{2},
			wantLost: ids("s", "a", "b"), wantTasks: ids("s", "a", "b")},
		{name: "chain cut by a materialised piece",
			pieces: []Derivation{srcPiece("s", 1, 10), materialised(derived("a", 1, "s")), derived("b", 1, "a")},
			lost:   []WorkerID{1}, needed: ids("b"), survivors: []WorkerID{2},
			wantLost: ids("s", "b"), wantTasks: ids("b"), wantFetch: ids("a")},
		{name: "materialised needed piece needs nothing",
			pieces: []Derivation{srcPiece("s", 1, 10), materialised(derived("a", 1, "s"))},
			lost:   []WorkerID{1}, needed: ids("a"), survivors: []WorkerID{2},
			wantLost: ids("s"), wantTasks: ids()},
		{name: "diamond, only the join lost", pieces: diamond, lost: []WorkerID{1}, needed: ids("j"), survivors: []WorkerID{2, 3},
			wantLost: ids("s", "j"), wantTasks: ids("j"), wantFetch: ids("l", "r")},
		{name: "diamond, one side lost", pieces: diamond, lost: []WorkerID{1, 2}, needed: ids("j"), survivors: []WorkerID{3},
			wantLost: ids("s", "l", "j"), wantTasks: ids("s", "l", "j"), wantFetch: ids("r")},
		{name: "diamond, everything lost: shared parent rebuilt once", pieces: diamond, lost: []WorkerID{1, 2, 3},
			needed: ids("j", "l"), survivors: []WorkerID{4},
			wantLost: ids("s", "l", "r", "j"), wantTasks: ids("s", "l", "r", "j")},
		{name: "lost but not needed is not rebuilt", pieces: diamond, lost: []WorkerID{2}, needed: ids("r"), survivors: []WorkerID{1},
			wantLost: ids("l"), wantTasks: ids()},
		{name: "no survivors", pieces: chain, lost: []WorkerID{1}, needed: ids("b"), wantErr: ErrNoSurvivors},
		{name: "non-deterministic lost piece refused",
			pieces: []Derivation{srcPiece("s", 1, 10), nondet(derived("a", 1, "s"))},
			lost:   []WorkerID{1}, needed: ids("a"), survivors: []WorkerID{2}, wantErr: ErrNondeterministic},
		{name: "non-deterministic ancestor refused",
			pieces: []Derivation{nondet(srcPiece("s", 1, 10)), derived("a", 1, "s")},
			lost:   []WorkerID{1}, needed: ids("a"), survivors: []WorkerID{2}, wantErr: ErrNondeterministic},
		{name: "non-deterministic but alive is fine",
			pieces: []Derivation{nondet(srcPiece("s", 2, 10)), derived("a", 1, "s")},
			lost:   []WorkerID{1}, needed: ids("a"), survivors: []WorkerID{2},
			wantLost: ids("a"), wantTasks: ids("a"), wantFetch: ids("s")},
		{name: "non-deterministic behind a materialised cut is fine",
			pieces: []Derivation{nondet(srcPiece("s", 1, 10)), materialised(derived("a", 1, "s")), derived("b", 1, "a")},
			lost:   []WorkerID{1}, needed: ids("b"), survivors: []WorkerID{2},
			wantLost: ids("s", "b"), wantTasks: ids("b"), wantFetch: ids("a")},
		{name: "unknown needed piece", pieces: chain, lost: []WorkerID{1}, needed: ids("zz"), survivors: []WorkerID{2}, wantErrAny: true},
		{name: "survivor that is lost", pieces: chain, lost: []WorkerID{1}, needed: ids("b"), survivors: []WorkerID{1}, wantErrAny: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := graphOf(t, tc.pieces...)
			p, err := Plan(g, tc.lost, tc.needed, tc.survivors)
			if tc.wantErr != nil || tc.wantErrAny {
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				t.Logf("refused as expected: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := append(ids(), p.Lost...); !reflect.DeepEqual(got, tc.wantLost) {
				t.Errorf("lost = %v, want %v", got, tc.wantLost)
			}
			if got := taskIDs(p); !reflect.DeepEqual(got, tc.wantTasks) {
				t.Errorf("tasks = %v, want %v", got, tc.wantTasks)
			}
			if !reflect.DeepEqual(p.Fetch, tc.wantFetch) {
				t.Errorf("fetch = %v, want %v", p.Fetch, tc.wantFetch)
			}
			checkPlanShape(t, g, p, tc.lost)
		})
	}
}

// checkPlanShape checks the invariants of any plan: parents come first or
// are fetched, every task runs on a survivor, and fetched pieces are
// available.
func checkPlanShape(t *testing.T, g *Graph, p RebuildPlan, lost []WorkerID) {
	t.Helper()
	dead := map[WorkerID]bool{}
	for _, w := range lost {
		dead[w] = true
	}
	surv := map[WorkerID]bool{}
	for _, w := range p.Survivors {
		surv[w] = true
	}
	ready := map[PieceID]bool{}
	for _, id := range p.Fetch {
		d, _ := g.Piece(id)
		if !d.Materialised && dead[d.Worker] {
			t.Errorf("fetch %s, which is lost", id)
		}
		ready[id] = true
	}
	for _, task := range p.Tasks {
		for _, par := range task.Piece.Parents {
			if !ready[par] {
				t.Errorf("task %s before its parent %s", task.Piece.ID, par)
			}
		}
		if !surv[task.Worker] || dead[task.Worker] {
			t.Errorf("task %s on worker %d, not a survivor", task.Piece.ID, task.Worker)
		}
		ready[task.Piece.ID] = true
	}
}

func TestPlanSpreadsByLoad(t *testing.T) {
	var ds []Derivation
	var need []PieceID
	// Eight lost pieces of unequal size: 4 big (100) then 4 small (10).
	for i, n := range []int64{100, 100, 100, 100, 10, 10, 10, 10} {
		d := srcPiece(string(rune('a'+i)), 0, n)
		ds = append(ds, d)
		need = append(need, d.ID)
	}
	g := graphOf(t, ds...)
	p, err := Plan(g, []WorkerID{0}, need, []WorkerID{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	load := map[WorkerID]int64{}
	for _, task := range p.Tasks {
		load[task.Worker] += task.Piece.Input.Records()
	}
	for w := WorkerID(1); w <= 4; w++ {
		if load[w] != 110 {
			t.Errorf("worker %d rebuilds %d records, want 110 (loads %v)", w, load[w], load)
		}
	}
}

func TestPlanRerunRedoesEverything(t *testing.T) {
	g := graphOf(t, srcPiece("s", 1, 10), derived("a", 2, "s"), materialised(derived("m", 1, "s")), derived("b", 2, "m"))
	p, err := PlanRerun(g, ids("a", "b"), []WorkerID{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	// The materialised piece still cuts the chain: a rerun reads it, it does
	// not recompute it.
	if got, want := taskIDs(p), ids("s", "a", "b"); !reflect.DeepEqual(got, want) {
		t.Errorf("tasks = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(p.Fetch, ids("m")) {
		t.Errorf("fetch = %v", p.Fetch)
	}
}

func TestGraphAddRules(t *testing.T) {
	g := graphOf(t, srcPiece("s", 1, 10))
	bad := []Derivation{
		srcPiece("s", 1, 10), // duplicate
		{ID: "x", Steps: det},
		derived("y", 1, "nope"),
		{ID: "z", Parents: ids("s"), Input: srcPiece("q", 1, 1).Input},
		{ID: ""},
		{ID: "r", Input: &InputRange{Input: "in", Start: source.Position{Partition: "p0", Offset: 5}, End: 4}},
	}
	for _, d := range bad {
		if err := g.Add(d); err == nil {
			t.Errorf("Add(%+v) accepted", d)
		}
	}
}

func TestGraphJSONAndDepth(t *testing.T) {
	g := graphOf(t, srcPiece("s", 1, 10), derived("a", 1, "s"), derived("b", 2, "a"),
		materialised(derived("m", 2, "b")), derived("c", 3, "m", "s"))
	for id, want := range map[PieceID]int{"s": 1, "a": 2, "b": 3, "m": 0, "c": 2} {
		if got := g.Depth(id); got != want {
			t.Errorf("Depth(%s) = %d, want %d", id, got, want)
		}
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back Graph
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Pieces(), g.Pieces()) {
		t.Errorf("round trip:\n%s\n%+v", b, back.Pieces())
	}
	// A stored graph whose child comes before its parent is refused.
	if err := json.Unmarshal([]byte(`[{"id":"a","parents":["s"],"steps":[]},{"id":"s","input":{"input":"in","partition":0,"start":{"partition":"p0","offset":0},"end":1},"steps":[]}]`), &back); err == nil {
		t.Error("out-of-order graph accepted")
	}
}
