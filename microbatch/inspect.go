package microbatch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements inspect.Inspector: one entry per batch id found
// under microbatch/<job>/<run id>/, complete when its commit entry exists.
// What a restart does with an uncommitted one is what PlanRestart decides
// from the same listing, so inspect and restart cannot disagree.
func (Executor) RecoveryPoints(objs []storage.Object) []inspect.RecoveryPoint {
	set := inspect.NewPointSet("microbatch", "batch")
	names := map[string][]string{} // run -> names relative to its prefix
	for _, o := range objs {
		runName, rest, ok := inspect.SplitRunName(o.Name, "microbatch")
		if !ok {
			continue
		}
		var id int64 = -1
		for _, d := range []string{dirOffsets, dirCommits, dirState} {
			if v, ok := parseID(strings.TrimPrefix(rest, d)); ok && strings.HasPrefix(rest, d) {
				id = v
			}
		}
		if id < 0 {
			continue
		}
		set.Add(runName, id, o)
		names[runName] = append(names[runName], rest)
	}
	listings := map[string]Listing{}
	plans := map[string]RestartPlan{}
	planErr := map[string]error{}
	for r, ns := range names {
		l := ParseListing(ns)
		listings[r] = l
		plans[r], planErr[r] = PlanRestart(l)
	}
	return set.Finish(func(p *inspect.RecoveryPoint) {
		l, plan := listings[p.Run], plans[p.Run]
		switch {
		case slices.Contains(l.Commits, p.ID):
			p.Complete, p.Status = true, "committed"
		case planErr[p.Run] != nil:
			p.Status = "not resumable: " + planErr[p.Run].Error()
		case p.ID == plan.Rerun:
			p.Status = "offsets logged, no commit entry: a restart re-runs it with the logged offsets"
		case p.ID == plan.Next && slices.Contains(l.Offsets, p.ID):
			p.Status = fmt.Sprintf("offsets written ahead beside batch %d's commit, which did not land: a restart plans it anew", plan.Rerun)
		default:
			p.Status = "state objects without an offsets entry: left over, never read"
		}
	})
}
