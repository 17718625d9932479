package checkpoint

import (
	"reflect"
	"slices"
	"testing"
)

func TestRestore(t *testing.T) {
	tests := []struct {
		name string
		in   Listing
		want RestorePlan
	}{
		{
			name: "empty storage starts from scratch",
			want: RestorePlan{NextID: 1},
		},
		{
			name: "newest complete",
			in:   Listing{WithMetadata: []ID{3, 1, 2}},
			want: RestorePlan{From: 3, Found: true, Fallbacks: []ID{2, 1}, Complete: []ID{1, 2, 3}, NextID: 4},
		},
		{
			// The crash hit after every part of 5 was durable but before
			// its metadata was written: 5 is not a recovery point, 4 is.
			name: "crash after all parts durable, before metadata: previous one",
			in:   Listing{WithMetadata: []ID{3, 4}, PartsOnly: []ID{5}},
			want: RestorePlan{From: 4, Found: true, Fallbacks: []ID{3}, Complete: []ID{3, 4}, Discard: []ID{5}, NextID: 6},
		},
		{
			name: "only incomplete: start from scratch, never reuse their ids",
			in:   Listing{PartsOnly: []ID{2, 1}},
			want: RestorePlan{Discard: []ID{1, 2}, NextID: 3},
		},
		{
			name: "old orphans are discarded too",
			in:   Listing{WithMetadata: []ID{7}, PartsOnly: []ID{5, 6}},
			want: RestorePlan{From: 7, Found: true, Complete: []ID{7}, Discard: []ID{5, 6}, NextID: 8},
		},
		{
			name: "an id listed in both has metadata: complete, not discarded",
			in:   Listing{WithMetadata: []ID{4, 4}, PartsOnly: []ID{4, 5, 5}},
			want: RestorePlan{From: 4, Found: true, Complete: []ID{4}, Discard: []ID{5}, NextID: 6},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Restore(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Restore(%+v)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestCrashBeforeMetadataRecoversPrevious plays the whole story: checkpoint
// 1 completes, every part of checkpoint 2 becomes durable, the coordinator
// dies before writing 2's metadata. What storage holds afterwards restores
// 1, discards 2, and the restarted coordinator continues at 3.
func TestCrashBeforeMetadataRecoversPrevious(t *testing.T) {
	c, err := NewCoordinator(Config{Tasks: []TaskID{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var listing Listing // what durable storage would hold
	parts := map[ID]bool{}
	run := func(id ID, crashBeforeMetadata bool) {
		c.Step(Trigger{at(int(id))})
		c.Step(Ack{at(int(id)), id, "a", Part{Durable: true}})
		parts[id] = true
		as := c.Step(Ack{at(int(id)), id, "b", Part{Durable: true}})
		if _, ok := as[0].(WriteMetadata); !ok {
			t.Fatalf("want WriteMetadata, got %v", render(as))
		}
		if crashBeforeMetadata {
			return
		}
		listing.WithMetadata = append(listing.WithMetadata, id)
		c.Step(MetadataWritten{at(int(id)), id})
	}
	run(1, false)
	run(2, true)
	for id := range parts {
		if !slices.Contains(listing.WithMetadata, id) {
			listing.PartsOnly = append(listing.PartsOnly, id)
		}
	}
	plan := Restore(listing)
	if !plan.Found || plan.From != 1 || !reflect.DeepEqual(plan.Discard, []ID{2}) {
		t.Fatalf("plan = %+v, want restore 1 and discard 2", plan)
	}
	c2, err := NewCoordinator(Config{Tasks: []TaskID{"a", "b"}, NextID: plan.NextID, Completed: plan.Complete})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(c2.Step(Trigger{at(10)})); got[0] != "inject(3)" {
		t.Errorf("restarted coordinator: %v", got)
	}
	if id, ok := c2.Latest(); !ok || id != 1 {
		t.Errorf("latest after restart = %d, %v", id, ok)
	}
}
