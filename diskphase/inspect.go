package diskphase

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoints implements run.Inspector: one entry per finite job j<J>
// under diskphase/<job>/<run id>/, complete once its _SUCCESS marker is
// written; an incomplete one shows how many units its ledger holds, which
// is what a restarted coordinator will not redo.
func (Executor) RecoveryPoints(objs []storage.Object) []run.RecoveryPoint {
	type key struct {
		run string
		job int
	}
	points := map[key]*run.RecoveryPoint{}
	var order []key
	success := map[key]bool{}
	maps, reduces := map[key]int{}, map[key]int{}
	for _, o := range objs {
		rest, ok := strings.CutPrefix(o.Name, "diskphase/")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, "/", 3) // job, run id, the rest
		if len(f) != 3 || len(f[2]) < 8 || f[2][0] != 'j' || f[2][7] != '/' {
			continue // run.json, coordinator markers
		}
		j, err := strconv.Atoi(f[2][1:7])
		if err != nil || j < 0 {
			continue
		}
		k := key{f[0] + "/" + f[1], j}
		p := points[k]
		if p == nil {
			p = &run.RecoveryPoint{Executor: "diskphase", Run: k.run, Kind: "finite job", ID: int64(j)}
			points[k] = p
			order = append(order, k)
		}
		p.Add(o)
		pn := newNames(f[0], f[1]).parse(o.Name)
		switch {
		case pn.kind == objSuccess:
			success[k] = true
		case pn.kind == objLedger && pn.unit.Kind == kindReduce:
			reduces[k]++
		case pn.kind == objLedger:
			maps[k]++
		}
	}
	out := make([]run.RecoveryPoint, 0, len(order))
	for _, k := range order {
		p := points[k]
		if success[k] {
			p.Complete, p.Status = true, "committed (_SUCCESS)"
		} else {
			p.Status = fmt.Sprintf("running or interrupted: ledger holds %d map and %d reduce units (a restart redoes only the others)", maps[k], reduces[k])
		}
		out = append(out, *p)
	}
	return out
}
