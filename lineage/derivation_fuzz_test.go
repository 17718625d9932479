package lineage

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/source"
)

// FuzzGraphUnmarshal: a stored graph that decodes obeys every rule of Add
// (parents first, no dangling parent, one kind of origin), encodes to a
// graph that decodes to the same encoding, and every piece has a finite
// depth; anything else is an error, never a panic.
func FuzzGraphUnmarshal(f *testing.F) {
	g := NewGraph()
	in := &InputRange{Input: "in", Partition: 1, Start: source.Position{Partition: "p1", Offset: 3}, End: 9}
	for _, d := range []Derivation{
		{ID: "b0/src/p1", Input: in, Steps: []Step{{Stage: "filter", Deterministic: true}}, Worker: 1},
		{ID: "b0/map/p1", Parents: []PieceID{"b0/src/p1"}, Steps: []Step{{Stage: "project", Deterministic: true}}, Worker: 2},
		{ID: "b1/join", Parents: []PieceID{"b0/src/p1", "b0/map/p1"}, Steps: []Step{{Stage: "rand"}}, Materialised: true},
	} {
		if err := g.Add(d); err != nil {
			f.Fatal(err)
		}
	}
	seed, err := json.Marshal(g)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`[{"id":"a","parents":["a"],"steps":[]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g Graph
		if err := json.Unmarshal(data, &g); err != nil {
			return
		}
		enc, err := json.Marshal(&g)
		if err != nil {
			t.Fatalf("decoded graph does not encode: %v", err)
		}
		var back Graph
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("re-encoded graph does not decode: %v\n%s", err, enc)
		}
		if again, _ := json.Marshal(&back); !bytes.Equal(enc, again) {
			t.Fatalf("graph changed in a round trip:\n %s\n %s", enc, again)
		}
		seen := map[PieceID]bool{}
		for _, d := range g.Pieces() {
			for _, p := range d.Parents {
				if !seen[p] {
					t.Fatalf("piece %q names parent %q recorded after it", d.ID, p)
				}
			}
			if (d.Input == nil) == (len(d.Parents) == 0) {
				t.Fatalf("piece %q has both or neither origin", d.ID)
			}
			seen[d.ID] = true
			if dep := g.Depth(d.ID); dep < 0 || dep > g.Len() {
				t.Fatalf("piece %q has depth %d in a graph of %d pieces", d.ID, dep, g.Len())
			}
		}
	})
}
