package main

import (
	"math"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// wall-clock: the run restored a cut that had records in flight; its
// result differs from the reference, key by key, by exactly those
// records (lost: their count and values missing; twice: added again), and
// the marker run equals the reference.
func TestTeachWallClock(t *testing.T) {
	worldLesson(t, "wall-clock", func(v *verdict) {
		w := v.wrong
		restored := int64(-1)
		for _, e := range w.rec.Events {
			if e.Kind == spacetime.Restore && e.ID > 0 {
				restored = e.ID
			}
		}
		if restored < 0 {
			t.Fatalf("the wall-clock run restored no checkpoint")
		}
		// Every record of the input, by id, from the source itself.
		input := map[int64][2]int64{}
		for _, spec := range w.cfg.Inputs {
			for p := range mustPartitions(t, spec) {
				for id, kv := range inputRows(t, spec, p, 0, math.MaxInt64) {
					input[id] = kv
				}
			}
		}
		want := map[int64][2]int64{}
		inFlight, doubled := 0, 0
		for _, s := range w.steps {
			if int64(len(s.IDs)) != s.To-s.From {
				t.Errorf("cut %d on %s: %d ids for rows [%d, %d)", s.Point, s.Task, len(s.IDs), s.From, s.To)
			}
			if s.Point != restored {
				continue
			}
			sign := int64(-1)
			if strings.HasPrefix(s.Note, "twice") {
				sign = 1
				doubled += len(s.IDs)
			}
			for _, id := range s.IDs {
				kv, ok := input[id]
				if !ok || kv[1] < 0 {
					t.Fatalf("cut %d names record %d, which the input does not hold or the filter drops", s.Point, id)
				}
				d := want[kv[0]]
				want[kv[0]] = [2]int64{d[0] + sign, d[1] + sign*kv[1]}
				inFlight++
			}
		}
		// Every cut has a source that saved before its receivers and one
		// that saved after them: records both doubled and lost.
		if doubled == 0 || doubled == inFlight {
			t.Fatalf("the restored cut %d had %d records in flight, %d of them doubled: want both lost and doubled ones", restored, inFlight, doubled)
		}
		ref, err := perKey(referenceOf(t, w, w.cfg.Inputs))
		if err != nil {
			t.Fatal(err)
		}
		got, err := perKey(w.result)
		if err != nil {
			t.Fatal(err)
		}
		keys := mergeKeys(ref, got)
		for k := range want {
			keys[k] = true
		}
		for k := range keys {
			if d := [2]int64{got[k][0] - ref[k][0], got[k][1] - ref[k][1]}; d != want[k] {
				t.Errorf("key %d: count and sum off the reference by %v, want %v from the cut's in-flight records", k, d, want[k])
			}
		}
		equalsReference(t, "the marker run", v.right)
	})
}

func mustPartitions(t *testing.T, spec string) []string {
	t.Helper()
	p, err := partitionNames(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
