package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

func TestHistoryCountsKeepsTheNewestAndForwards(t *testing.T) {
	var fwd bytes.Buffer
	h := NewHistory(&fwd)
	var all bytes.Buffer
	for i := range 25 {
		fmt.Fprintf(&all, "{\"event\":\"batch\",\"batch_id\":%d}\n", i)
	}
	all.WriteString("{\"event\":\"crash\",\"cause\":\"x\"}\nnot json\n")
	// Lines arrive cut at arbitrary places.
	b := all.Bytes()
	for i := 0; i < len(b); i += 7 {
		if _, err := h.Write(b[i:min(i+7, len(b))]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(fwd.Bytes(), b) {
		t.Fatal("forwarded bytes differ from the written ones")
	}
	var s Summary
	h.Fold(&s)
	if s.History == nil || s.History.Counts["batch"] != 25 || s.History.Counts["crash"] != 1 || len(s.History.Counts) != 2 {
		t.Fatalf("counts %+v", s.History)
	}
	recent := s.History.Recent["batch"]
	if len(recent) != HistoryKeep {
		t.Fatalf("%d recent batches kept, want %d", len(recent), HistoryKeep)
	}
	for i, raw := range recent {
		var ev struct {
			BatchID int `json:"batch_id"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil || ev.BatchID != 25-HistoryKeep+i {
			t.Fatalf("recent[%d] = %s, want batch %d", i, raw, 25-HistoryKeep+i)
		}
	}
	var empty Summary
	NewHistory(nil).Fold(&empty)
	if empty.History != nil {
		t.Fatal("a run without events must leave history null")
	}
}
