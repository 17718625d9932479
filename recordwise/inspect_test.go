package recordwise

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

func TestRecoveryPointsFromAListing(t *testing.T) {
	pre := runPrefix("windowed-sum", "r7")
	objs := []storage.Object{
		{Name: pre + metadataKey(1), Size: 50},
		{Name: pre + partKey(1, "window-0"), Size: 10},
		{Name: pre + opStateKey(1, "window-0", "window"), Size: 1000},
		{Name: pre + partKey(2, "window-0"), Size: 10},
		{Name: pre + channelsKey(2, "window-0"), Size: 300},
		{Name: pre + "unrelated", Size: 1},
	}
	got := Executor{}.RecoveryPoints(objs)
	if len(got) != 2 {
		t.Fatalf("%d points, want checkpoints 1 and 2: %+v", len(got), got)
	}
	if !got[0].Complete || got[0].ID != 1 || got[0].Objects != 3 || got[0].Bytes != 1060 || !strings.Contains(got[0].Status, "1 parts") {
		t.Errorf("checkpoint 1: %+v", got[0])
	}
	if got[1].Complete || got[1].ID != 2 || !strings.Contains(got[1].Status, "no metadata: not a recovery point") {
		t.Errorf("checkpoint 2 has parts but no metadata: %+v", got[1])
	}
}
