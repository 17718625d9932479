package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSummaryResumedFrom: resumed_from is null for a run that was not
// resumed, and the text summary names the point a resumed run restored and
// the records it covers, or that storage held none.
func TestSummaryResumedFrom(t *testing.T) {
	var b bytes.Buffer
	if err := (&Summary{}).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["resumed_from"]; !ok || v != nil {
		t.Fatalf("resumed_from of a run not resumed: %v (present %v), want null", v, ok)
	}
	id := int64(7)
	for _, tc := range []struct {
		rf   ResumedFrom
		want string
	}{
		{ResumedFrom{Kind: "checkpoint", ID: &id, RecordsBefore: 12000}, "resumed run from checkpoint 7, which covers 12000 records"},
		{ResumedFrom{Kind: "batch"}, "resumed run from the start: storage held no complete batch"},
		{ResumedFrom{Kind: "finite job", RecordsBefore: 500}, "resumed run with no complete finite job in storage; the finished work there covers 500 records"},
	} {
		b.Reset()
		if err := (&Summary{Resumed: true, ResumedFrom: &tc.rf}).WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) {
			t.Fatalf("text summary:\n%s\nwant a line %q", b.String(), tc.want)
		}
	}
}
