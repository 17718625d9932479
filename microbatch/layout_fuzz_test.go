package microbatch

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
)

// FuzzDecodeEntries: whatever decodes as an offsets entry, commit entry or
// state manifest encodes to an entry that decodes to the same encoding;
// a manifest's index either fails or rebuilds the same manifest; nothing
// panics.
func FuzzDecodeEntries(f *testing.F) {
	for _, v := range []any{
		offsetsEntry{Format: formatVersion, Batch: 7, Job: "etl",
			Ranges:          []partRange{{Input: "in", Partition: "p0", Start: 10, End: 20}, {Input: "in", Partition: "p1", Start: 0, End: 3}},
			WatermarkBefore: -1, Watermark: 15, Tracker: eventtime.State{MaxTS: []int64{19, 2}, Done: []bool{false, true}}},
		commitEntry{Format: formatVersion, Batch: 7, StateVersion: 5, InputRows: 13, CommittedUnixNano: 1},
		manifestEntry{Format: manifestFormat, Version: 5, Full: true, Stages: map[string][]stateRef{
			"count": {{Object: stateObjectName(4, "count"), KeyGroups: []int{0, 3}}, {Object: stateObjectName(5, "count"), KeyGroups: []int{127}}}}},
		// A chain: key group 3 whole in version 4, edited in version 5.
		manifestEntry{Format: manifestFormat, Version: 5, DeltaBytes: 99, Stages: map[string][]stateRef{
			"count": {{Object: stateObjectName(4, "count"), KeyGroups: []int{0, 3}}, {Object: stateObjectName(5, "count"), KeyGroups: []int{3}}}}},
	} {
		b, err := encodeEntry(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if e, err := decodeOffsets(data); err == nil {
			again := reencode(t, e)
			if e2, err := decodeOffsets(again); err != nil || !bytes.Equal(reencode(t, e2), again) {
				t.Fatalf("offsets entry does not round-trip: %v", err)
			}
			_ = e.rows()
		}
		if e, err := decodeCommit(data); err == nil {
			again := reencode(t, e)
			if e2, err := decodeCommit(again); err != nil || *e2 != *e {
				t.Fatalf("commit entry does not round-trip: %v", err)
			}
		}
		m, err := decodeManifest(data)
		if err != nil {
			return
		}
		again := reencode(t, m)
		if m2, err := decodeManifest(again); err != nil || !bytes.Equal(reencode(t, m2), again) {
			t.Fatalf("manifest does not round-trip: %v", err)
		}
		idx, err := m.index(checkStateObjectName)
		if err != nil {
			return
		}
		rebuilt := idx.toManifest(m.Version, m.Full, m.DeltaBytes)
		idx2, err := rebuilt.index(checkStateObjectName)
		if err != nil {
			t.Fatalf("manifest rebuilt from an accepted index is refused: %v", err)
		}
		if len(idx2) != len(idx) {
			t.Fatalf("index has %d stages, rebuilt %d", len(idx), len(idx2))
		}
		for stage, a := range idx {
			b := idx2[stage]
			if b == nil {
				t.Fatalf("stage %s missing after rebuilding the manifest", stage)
			}
			for kg := range a {
				if !slices.Equal(a[kg], b[kg]) {
					t.Fatalf("stage %s key group %d: chain %v, rebuilt %v", stage, kg, a[kg], b[kg])
				}
			}
		}
	})
}

func reencode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encodeEntry(v)
	if err != nil {
		t.Fatalf("decoded %T does not encode: %v", v, err)
	}
	return b
}

// FuzzParseListing: every name is either unknown or parsed as exactly the
// object the executor writes under that name; listed ids ascend.
func FuzzParseListing(f *testing.F) {
	f.Add(strings.Join([]string{offsetsName(0), commitName(0), manifestName(0), stateObjectName(0, "count"),
		offsetsName(12), "offsets/1", "state/00000000000000000003-x", "commits/-0000000000000000001"}, "\n"))
	f.Fuzz(func(t *testing.T, list string) {
		names := strings.Split(list, "\n")
		l := ParseListing(names)
		known := map[string]bool{}
		for _, id := range l.Offsets {
			known[offsetsName(id)] = true
		}
		for _, id := range l.Commits {
			known[commitName(id)] = true
		}
		for _, v := range l.Manifests {
			known[manifestName(v)] = true
		}
		for v, objs := range l.StateObjects {
			for _, o := range objs {
				if !strings.HasPrefix(o, dirState+batchName(v)+"-op-") {
					t.Fatalf("%q listed as a state object of version %d", o, v)
				}
				known[o] = true
			}
		}
		n := len(l.Unknown)
		for _, name := range names {
			if !known[name] {
				n--
			}
		}
		if n != 0 {
			t.Fatalf("names parsed as objects that do not spell them: %+v", l)
		}
		for _, s := range [][]int64{l.Offsets, l.Commits, l.Manifests} {
			for i := 1; i < len(s); i++ {
				if s[i] < s[i-1] {
					t.Fatalf("ids not ascending: %v", s)
				}
			}
		}
		_, _ = PlanRestart(l)
	})
}
