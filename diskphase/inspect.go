package diskphase

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements inspect.Inspector: one entry per finite job j<J>
// under diskphase/<job>/<run id>/, complete once its _SUCCESS marker is
// written; an incomplete one shows how many units its ledger holds, which
// is what a restarted coordinator will not redo.
func (Executor) RecoveryPoints(objs []storage.Object) []inspect.RecoveryPoint {
	set := inspect.NewPointSet("diskphase", "finite job")
	success := map[*inspect.RecoveryPoint]bool{}
	maps, reduces := map[*inspect.RecoveryPoint]int{}, map[*inspect.RecoveryPoint]int{}
	for _, o := range objs {
		runName, rest, ok := inspect.SplitRunName(o.Name, "diskphase")
		if !ok || len(rest) < 8 || rest[0] != 'j' || rest[7] != '/' {
			continue // run.json, coordinator markers
		}
		j, err := strconv.Atoi(rest[1:7])
		if err != nil || j < 0 {
			continue
		}
		p := set.Add(runName, int64(j), o)
		jobName, runID, _ := strings.Cut(runName, "/")
		pn := newNames(jobName, runID).parse(o.Name)
		switch {
		case pn.kind == objSuccess:
			success[p] = true
		case pn.kind == objLedger && pn.unit.Kind == kindReduce:
			reduces[p]++
		case pn.kind == objLedger:
			maps[p]++
		}
	}
	return set.Finish(func(p *inspect.RecoveryPoint) {
		if success[p] {
			p.Complete, p.Status = true, "committed (_SUCCESS)"
		} else {
			p.Status = fmt.Sprintf("running or interrupted: ledger holds %d map and %d reduce units (a restart redoes only the others)", maps[p], reduces[p])
		}
	})
}
