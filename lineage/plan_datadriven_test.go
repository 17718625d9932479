package lineage

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestPlanDataDriven runs the planning scripts in testdata/. Commands:
//
//	graph
//	<one piece per line: piece ID worker=W (records=N | parents=P,Q)
//	 [materialised] [nondeterministic]>
//	plan lost=W,... needed=P,... [survivors=W,...]
//	rerun needed=P,... survivors=W,...
//
// graph replaces the graph; plan and rerun print the RebuildPlan or the
// refusal. Rewrite the expected output with -rewrite.
func TestPlanDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		g := NewGraph()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "graph":
				g = NewGraph()
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					d, err := parsePiece(line)
					if err == nil {
						err = g.Add(d)
					}
					if err != nil {
						td.Fatalf(t, "%s: %v", line, err)
					}
				}
				return fmt.Sprintf("%d pieces\n", g.Len())
			case "plan", "rerun":
				args := map[string]string{}
				for _, a := range td.CmdArgs {
					args[a.Key] = strings.Join(a.Vals, ",")
				}
				var p RebuildPlan
				var err error
				if td.Cmd == "plan" {
					p, err = Plan(g, workers(args["lost"]), pieces(args["needed"]), workers(args["survivors"]))
				} else {
					p, err = PlanRerun(g, pieces(args["needed"]), workers(args["survivors"]))
				}
				if err != nil {
					return fmt.Sprintf("refused: %v\n", err)
				}
				return showPlan(p)
			}
			td.Fatalf(t, "unknown command %q", td.Cmd)
			return ""
		})
	})
}

func parsePiece(line string) (Derivation, error) {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "piece" {
		return Derivation{}, fmt.Errorf("want: piece ID key=value...")
	}
	d := Derivation{ID: PieceID(f[1]), Steps: []Step{{Stage: "map", Deterministic: true}}}
	for _, kv := range f[2:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "worker":
			n, err := strconv.Atoi(v)
			if err != nil {
				return d, err
			}
			d.Worker = WorkerID(n)
		case "records":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return d, err
			}
			d.Input = &InputRange{Input: "in", End: n}
		case "parents":
			d.Parents = pieces(v)
		case "materialised":
			d.Materialised = true
		case "nondeterministic":
			d.Steps = append(d.Steps, Step{Stage: "sample"})
		default:
			return d, fmt.Errorf("unknown field %q", kv)
		}
	}
	return d, nil
}

func showPlan(p RebuildPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lost: %v\n", p.Lost)
	for _, t := range p.Tasks {
		from := "input"
		if len(t.Piece.Parents) > 0 {
			from = fmt.Sprint(t.Piece.Parents)
		}
		fmt.Fprintf(&b, "rebuild %s on worker %d from %s\n", t.Piece.ID, t.Worker, from)
	}
	if len(p.Fetch) > 0 {
		fmt.Fprintf(&b, "fetch: %v\n", p.Fetch)
	}
	if len(p.Survivors) > 0 {
		fmt.Fprintf(&b, "survivors: %v\n", p.Survivors)
	}
	return b.String()
}

func workers(s string) []WorkerID {
	var out []WorkerID
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		n, _ := strconv.Atoi(f)
		out = append(out, WorkerID(n))
	}
	return out
}

func pieces(s string) []PieceID {
	var out []PieceID
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' }) {
		out = append(out, PieceID(f))
	}
	return out
}
