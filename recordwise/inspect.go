package recordwise

import (
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements inspect.Inspector: one entry per chk-<id> directory
// under recordwise/<job>/<run id>/, complete only when the coordinator
// wrote its _metadata (every part was durable by then).
func (Executor) RecoveryPoints(objs []storage.Object) []inspect.RecoveryPoint {
	set := inspect.NewPointSet("recordwise", "checkpoint")
	meta := map[*inspect.RecoveryPoint]bool{}
	parts := map[*inspect.RecoveryPoint]int{}
	for _, o := range objs {
		runName, rest, ok := inspect.SplitRunName(o.Name, "recordwise")
		if !ok {
			continue
		}
		id, tail, ok := parseChkName(rest)
		if !ok {
			continue
		}
		p := set.Add(runName, int64(id), o)
		switch {
		case tail == metadataName:
			meta[p] = true
		case strings.HasSuffix(tail, "/"+partName):
			parts[p]++
		}
	}
	return set.Finish(func(p *inspect.RecoveryPoint) {
		if meta[p] {
			p.Complete, p.Status = true, fmt.Sprintf("metadata written; %d parts", parts[p])
		} else {
			p.Status = fmt.Sprintf("%d parts durable, no metadata: not a recovery point (removed at the next restart)", parts[p])
		}
	})
}
