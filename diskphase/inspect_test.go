package diskphase

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

func TestRecoveryPointsFromAListing(t *testing.T) {
	n := newNames("etl", "r3")
	objs := []storage.Object{
		{Name: n.runPlan(), Size: 9},
		{Name: n.coord(0), Size: 0},
		{Name: n.jobPlan(0), Size: 10},
		{Name: n.ledger(UnitID{Job: 0, Kind: kindMap, Index: 0}), Size: 10},
		{Name: n.success(0), Size: 10},
		{Name: n.jobPlan(1), Size: 10},
		{Name: n.ledger(UnitID{Job: 1, Kind: kindMap, Index: 0}), Size: 10},
		{Name: n.ledger(UnitID{Job: 1, Kind: kindMap, Index: 1}), Size: 10},
		{Name: n.ledger(UnitID{Job: 1, Kind: kindReduce, Index: 0}), Size: 10},
		{Name: n.mapFile(1, 0, 0, 1), Size: 500},
	}
	got := Executor{}.RecoveryPoints(objs)
	if len(got) != 2 {
		t.Fatalf("%d points, want finite jobs 0 and 1: %+v", len(got), got)
	}
	if !got[0].Complete || got[0].ID != 0 || got[0].Objects != 3 {
		t.Errorf("job 0: %+v", got[0])
	}
	if got[1].Complete || got[1].Objects != 5 || got[1].Bytes != 540 || !strings.Contains(got[1].Status, "2 map and 1 reduce units") {
		t.Errorf("job 1 is interrupted with 2 maps and 1 reduce done: %+v", got[1])
	}
}
