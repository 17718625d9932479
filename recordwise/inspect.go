package recordwise

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements run.Inspector: one entry per chk-<id> directory
// under recordwise/<job>/<run id>/, complete only when the coordinator
// wrote its _metadata (every part was durable by then).
func (Executor) RecoveryPoints(objs []storage.Object) []run.RecoveryPoint {
	type key struct {
		run string
		id  uint64
	}
	points := map[key]*run.RecoveryPoint{}
	var order []key
	meta := map[key]bool{}
	parts := map[key]int{}
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, "recordwise/")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, "/", 3) // job, run id, the rest
		if len(f) != 3 {
			continue
		}
		id, tail, ok := parseChkName(f[2])
		if !ok {
			continue
		}
		k := key{f[0] + "/" + f[1], uint64(id)}
		p := points[k]
		if p == nil {
			p = &run.RecoveryPoint{Executor: "recordwise", Run: k.run, Kind: "checkpoint", ID: int64(id)}
			points[k] = p
			order = append(order, k)
		}
		p.Add(o)
		switch {
		case tail == metadataName:
			meta[k] = true
		case strings.HasSuffix(tail, "/"+partName):
			parts[k]++
		}
	}
	out := make([]run.RecoveryPoint, 0, len(order))
	for _, k := range order {
		p := points[k]
		if meta[k] {
			p.Complete, p.Status = true, fmt.Sprintf("metadata written; %d parts", parts[k])
		} else {
			p.Status = fmt.Sprintf("%d parts durable, no metadata: not a recovery point (removed at the next restart)", parts[k])
		}
		out = append(out, *p)
	}
	return out
}
