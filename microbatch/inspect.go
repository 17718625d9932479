package microbatch

import (
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements run.Inspector: one entry per batch id found
// under microbatch/<job>/<run id>/, complete when its commit entry exists.
func (Executor) RecoveryPoints(objs []storage.Object) []run.RecoveryPoint {
	type key struct {
		run string
		id  int64
	}
	points := map[key]*run.RecoveryPoint{}
	var order []key
	have := map[key]map[string]bool{}
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, "microbatch/")
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, "/", 4) // job, run id, dir, name
		if len(parts) != 4 {
			continue
		}
		dir := parts[2] + "/"
		id, ok := parseID(parts[3])
		if !ok || (dir != dirOffsets && dir != dirCommits && dir != dirState) {
			continue
		}
		k := key{parts[0] + "/" + parts[1], id}
		p := points[k]
		if p == nil {
			p = &run.RecoveryPoint{Executor: "microbatch", Run: k.run, Kind: "batch", ID: id}
			points[k], have[k] = p, map[string]bool{}
			order = append(order, k)
		}
		p.Add(o)
		have[k][dir] = true
	}
	out := make([]run.RecoveryPoint, 0, len(order))
	for _, k := range order {
		p, h := points[k], have[k]
		switch {
		case h[dirCommits]:
			p.Complete, p.Status = true, "committed"
		case h[dirOffsets] && h[dirState]:
			p.Status = "offsets logged and state written, no commit entry: a restart re-runs it with the logged offsets"
		case h[dirOffsets]:
			p.Status = "offsets logged, no commit entry: a restart re-runs it with the logged offsets"
		default:
			p.Status = "state objects without an offsets entry: left over, never read"
		}
		out = append(out, *p)
	}
	return out
}
