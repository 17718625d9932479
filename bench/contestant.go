package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// Contestant is one executor configuration under test.
type Contestant struct {
	Executor string
	// Variant is one of the executor's run.Traits.Variants (recordwise's
	// barrier mode), empty for an executor without variants.
	Variant string
}

// Name is how the contestant is written on the command line and in tables:
// the executor's name, then "/" and the variant when it has variants.
func (c Contestant) Name() string {
	if c.Variant == "" {
		return c.Executor
	}
	return c.Executor + "/" + c.Variant
}

// DefaultContestants is every executor of execs but the reference, once
// per variant, comma-separated in the order of execs.
func DefaultContestants(execs []run.Executor) string {
	var out []string
	for _, e := range execs {
		tr := e.Traits()
		switch {
		case tr.Reference:
		case len(tr.Variants.Values) == 0:
			out = append(out, e.Name())
		default:
			for _, v := range tr.Variants.Values {
				out = append(out, Contestant{e.Name(), v}.Name())
			}
		}
	}
	return strings.Join(out, ",")
}

// ParseContestants reads a comma-separated list such as
// DefaultContestants. An executor with variants named alone means its
// default variant (aligned barriers). execs are the executors that exist.
func ParseContestants(list string, execs []run.Executor) ([]Contestant, error) {
	byName := map[string]run.Executor{}
	var known, variants, varied []string
	for _, e := range execs {
		byName[e.Name()] = e
		known = append(known, e.Name())
	}
	slices.Sort(known)
	for _, name := range known {
		if vs := byName[name].Traits().Variants.Values; len(vs) > 0 {
			varied = append(varied, name)
			for _, v := range vs {
				variants = append(variants, name+"/"+v)
			}
		}
	}
	var out []Contestant
	seen := map[string]bool{}
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		name, variant, _ := strings.Cut(part, "/")
		exec, ok := byName[name]
		if ok && exec.Traits().Reference {
			return nil, fmt.Errorf("invalid --executors %q: the %s executor is what every contestant is checked against, not a contestant", list, name)
		}
		if !ok {
			return nil, fmt.Errorf("invalid --executors %q: unknown executor %q (allowed: %s)", list, name, strings.Join(append(known, variants...), ", "))
		}
		vs := exec.Traits().Variants
		switch {
		case len(vs.Values) > 0 && variant == "":
			variant = vs.Values[0]
		case len(vs.Values) > 0 && !slices.Contains(vs.Values, variant):
			return nil, fmt.Errorf("invalid --executors %q: %s %s are %s, not %q", list, name, vs.Flag, strings.Join(vs.Values, " or "), variant)
		case len(vs.Values) == 0 && variant != "":
			return nil, fmt.Errorf("invalid --executors %q: only %s takes a %s (%q)", list, strings.Join(varied, " and "), variantKind(execs), part)
		}
		c := Contestant{Executor: name, Variant: variant}
		if seen[c.Name()] {
			return nil, fmt.Errorf("invalid --executors %q: %s is listed twice", list, c.Name())
		}
		seen[c.Name()] = true
		out = append(out, c)
	}
	return out, nil
}

// variantKind is what the variants of execs are called ("barrier mode"),
// or "variant" when they are of several kinds.
func variantKind(execs []run.Executor) string {
	kind := ""
	for _, e := range execs {
		switch k := e.Traits().Variants.Kind; {
		case k == "" || k == kind:
		case kind == "":
			kind = k
		default:
			return "variant"
		}
	}
	return cmp.Or(kind, "variant")
}
