package microbatch

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

func TestRecoveryPointsFromAListing(t *testing.T) {
	pre := runPrefix("keyed-count", "r1")
	objs := []storage.Object{
		{Name: pre + commitName(0), Size: 10},
		{Name: pre + commitName(1), Size: 10},
		{Name: pre + offsetsName(0), Size: 20},
		{Name: pre + offsetsName(1), Size: 20},
		{Name: pre + offsetsName(2), Size: 20},
		{Name: pre + manifestName(1), Size: 5},
		{Name: pre + stateObjectName(1, "count", 0), Size: 100},
		{Name: pre + stateObjectName(2, "count", 0), Size: 100},
		{Name: pre + offsetsName(3), Size: 20}, // written ahead beside commits/2, which did not land
		{Name: "recordwise/keyed-count/r1/chk-00000000000000000001/_metadata", Size: 1},
	}
	got := Executor{}.RecoveryPoints(objs)
	if len(got) != 4 {
		t.Fatalf("%d points, want batches 0 to 3: %+v", len(got), got)
	}
	byID := map[int64]int{}
	for i, p := range got {
		byID[p.ID] = i
		if p.Run != "keyed-count/r1" || p.Kind != "batch" {
			t.Errorf("point %+v", p)
		}
	}
	b1, b2 := got[byID[1]], got[byID[2]]
	if !got[byID[0]].Complete || !b1.Complete || b1.Objects != 4 || b1.Bytes != 135 {
		t.Errorf("committed batches: %+v %+v", got[byID[0]], b1)
	}
	if b2.Complete || !strings.Contains(b2.Status, "re-runs it with the logged offsets") || b2.Objects != 2 {
		t.Errorf("batch 2 has offsets and state but no commit: %+v", b2)
	}
	if b3 := got[byID[3]]; b3.Complete || !strings.Contains(b3.Status, "written ahead beside batch 2's commit") {
		t.Errorf("batch 3 was planned ahead: %+v", b3)
	}
}
