package microbatch

import (
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements run.Inspector: one entry per batch id found
// under microbatch/<job>/<run id>/, complete when its commit entry exists.
func (Executor) RecoveryPoints(objs []storage.Object) []run.RecoveryPoint {
	set := run.NewPointSet("microbatch", "batch")
	has := map[*run.RecoveryPoint]map[string]bool{}
	for _, o := range objs {
		runName, rest, ok := run.SplitRunName(o.Name, "microbatch")
		if !ok {
			continue
		}
		var dir string
		for _, d := range []string{dirOffsets, dirCommits, dirState} {
			if strings.HasPrefix(rest, d) {
				dir = d
			}
		}
		id, ok := parseID(rest[len(dir):])
		if dir == "" || !ok {
			continue
		}
		p := set.Add(runName, id, o)
		if has[p] == nil {
			has[p] = map[string]bool{}
		}
		has[p][dir] = true
	}
	return set.Finish(func(p *run.RecoveryPoint) {
		switch h := has[p]; {
		case h[dirCommits]:
			p.Complete, p.Status = true, "committed"
		case h[dirOffsets] && h[dirState]:
			p.Status = "offsets logged and state written, no commit entry: a restart re-runs it with the logged offsets"
		case h[dirOffsets]:
			p.Status = "offsets logged, no commit entry: a restart re-runs it with the logged offsets"
		default:
			p.Status = "state objects without an offsets entry: left over, never read"
		}
	})
}
