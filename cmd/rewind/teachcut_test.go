package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// cutCase is what one of the lessons about the cut did, read back from
// its verdict: the input, the mistake's log, and the point the wrong run
// restored.
type cutCase struct {
	t        *testing.T
	v        *verdict
	records  map[int][]inputRecord // partition -> every record, in offset order
	input    string
	restored int64
}

// at are the logged steps of point id.
func (cc *cutCase) at(id int64) []mistake.Step {
	var out []mistake.Step
	for _, s := range cc.v.wrong.steps {
		if s.Point == id {
			out = append(out, s)
		}
	}
	return out
}

// counts are keyed-count's result over recs: per key, rows with value >= 0
// and their sum (docs/jobs.md), as the test computes it.
func counts(recs []inputRecord, times func(inputRecord) int64) map[int64]keyCount {
	out := map[int64]keyCount{}
	for _, r := range recs {
		if r.Value < 0 {
			continue
		}
		n := times(r)
		c := out[r.Key]
		c.count += n
		c.sum += n * r.Value
		out[r.Key] = c
	}
	for k, c := range out {
		if c.count == 0 {
			delete(out, k)
		}
	}
	return out
}

func (cc *cutCase) all() []inputRecord {
	var out []inputRecord
	for _, p := range slices.Sorted(maps.Keys(cc.records)) {
		out = append(out, cc.records[p]...)
	}
	return out
}

// saysAsPredicted: the lesson's output says it held. The verdict is at the
// end of a line folded at traceWidth, so "(as predicted)" may be broken
// across two lines, depending on how long the observed counts are.
func saysAsPredicted(stdout string) bool {
	return strings.Contains(strings.Join(strings.Fields(stdout), " "), "(as predicted)")
}

// TestTeachTheCut runs each lesson about the cut through the command and
// checks, apart from the lesson's own verdict, that the right variant
// counts every key as the input says and that the wrong one is off by
// exactly the records the mistake's log names, no more, no fewer.
func TestTeachTheCut(t *testing.T) {
	seed := int64(testseed.Seed(t)%1000) + 1
	for _, tc := range []struct {
		name mistake.Name
		// want is what the wrong run must count, per key, from the
		// input and the log; it fails the test if the log shows no
		// mistake.
		want func(cc *cutCase) map[int64]keyCount
	}{
		{mistake.OffsetBehind, func(cc *cutCase) map[int64]keyCount { return cc.skewed(+1) }},
		{mistake.OffsetAhead, func(cc *cutCase) map[int64]keyCount { return cc.skewed(-1) }},
		{mistake.UnalignedNoInflight, (*cutCase).withoutInFlight},
		{mistake.RestartNoRestore, (*cutCase).restartedFromZero},
		{mistake.PartialPoint, (*cutCase).mixed},
	} {
		t.Run(string(tc.name), func(t *testing.T) {
			replay := fmt.Sprintf("go run ./cmd/rewind trace --teach %s --seed %d", tc.name, seed)
			var v *verdict
			sawVerdict = func(x *verdict) { v = x }
			defer func() { sawVerdict = nil }()
			code, stdout, stderr := rewind(t, "trace", "--teach", string(tc.name), "--seed", strconv.FormatInt(seed, 10))
			if code != 0 || v == nil {
				t.Fatalf("exit %d\n%s%s\nreplay: %s", code, stdout, stderr, replay)
			}
			if !v.holds || !saysAsPredicted(stdout) {
				t.Errorf("the lesson did not hold:\n%s\nreplay: %s", stdout, replay)
			}
			for _, line := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
				if n := utf8.RuneCountInString(line); n > traceWidth {
					t.Errorf("a line of %d columns: %q (replay: %s)", n, line, replay)
				}
			}
			cc := &cutCase{t: t, v: v, records: map[int][]inputRecord{}, restored: -1}
			for input, spec := range v.wrong.cfg.Inputs {
				cc.input = input
				src, err := source.Open(spec, source.Options{})
				if err != nil {
					t.Fatal(err)
				}
				parts := len(src.Partitions())
				src.Close()
				for p := range parts {
					recs, err := (&classroom{ctx: context.Background()}).records(v.wrong.cfg, input, p, 0, wholePartition)
					if err != nil {
						t.Fatal(err)
					}
					cc.records[p] = recs
				}
			}
			for _, e := range v.wrong.rec.Events {
				if e.Kind == spacetime.Restore {
					cc.restored = e.ID
				}
			}
			if len(v.wrong.steps) == 0 {
				t.Fatalf("the mistake logged no step: it did not happen (replay: %s)", replay)
			}
			truth := counts(cc.all(), func(inputRecord) int64 { return 1 })
			right, err := keyCounts(v.right.result)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(right, truth) {
				t.Errorf("the right variant counted %v, the input holds %v (replay: %s)", right, truth, replay)
			}
			wrong, err := keyCounts(v.wrong.result)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want(cc)
			if maps.Equal(want, truth) {
				t.Fatalf("the log predicts no difference: the mistake did not show (replay: %s)", replay)
			}
			if !maps.Equal(wrong, want) {
				t.Errorf("the wrong variant counted %v, want %v from the log %+v (restored point %d)\nreplay: %s",
					wrong, want, v.wrong.steps, cc.restored, replay)
			}
		})
	}
}

// skewed: the records between the saved position and the cut, in each
// partition whose position the restored point skewed, count sign times
// more.
func (cc *cutCase) skewed(sign int64) map[int64]keyCount {
	steps := cc.at(cc.restored)
	if len(steps) == 0 {
		cc.t.Fatalf("the restored point %d has no skewed position in the log %+v", cc.restored, cc.v.wrong.steps)
	}
	off := map[int][2]int64{}
	for _, s := range steps {
		if s.From >= s.To || s.To-s.From > offsetSkew {
			cc.t.Errorf("a skewed position [%d,%d) is not 1..%d records off the cut", s.From, s.To, offsetSkew)
		}
		off[s.Partition] = [2]int64{s.From, s.To}
	}
	return counts(cc.all(), func(r inputRecord) int64 {
		if o, ok := off[r.Partition]; ok && r.Offset >= o[0] && r.Offset < o[1] {
			return 1 + sign
		}
		return 1
	})
}

// withoutInFlight: the records the restored point's parts dropped in
// flight count never.
func (cc *cutCase) withoutInFlight() map[int64]keyCount {
	dropped := map[int64]bool{}
	for _, s := range cc.at(cc.restored) {
		for _, id := range s.IDs {
			if dropped[id] {
				cc.t.Errorf("record %d dropped twice", id)
			}
			dropped[id] = true
		}
	}
	if len(dropped) == 0 {
		cc.t.Fatalf("the restored point %d dropped no record in flight (log %+v)", cc.restored, cc.v.wrong.steps)
	}
	return counts(cc.all(), func(r inputRecord) int64 {
		if dropped[r.ID] {
			return 0
		}
		return 1
	})
}

// restartedFromZero: each key shows the greater of its count before the
// cut (published before the crash) and its count since.
func (cc *cutCase) restartedFromZero() map[int64]keyCount {
	cut := map[int]int64{}
	for _, s := range cc.at(cc.restored) {
		cut[s.Partition] = s.To
	}
	if len(cut) != len(cc.records) {
		cc.t.Fatalf("the log names the cut of %d partitions of %d: %+v", len(cut), len(cc.records), cc.v.wrong.steps)
	}
	before := counts(cc.all(), func(r inputRecord) int64 { return b2i(r.Offset < cut[r.Partition]) })
	since := counts(cc.all(), func(r inputRecord) int64 { return b2i(r.Offset >= cut[r.Partition]) })
	out := map[int64]keyCount{}
	for _, m := range []map[int64]keyCount{before, since} {
		for k, c := range m {
			if o := out[k]; c.count > o.count || (c.count == o.count && c.sum > o.sum) {
				out[k] = c
			}
		}
	}
	return out
}

// mixed: a record counts once for every cut it lies at or after among its
// source's restored read position and its key's owner's restored state:
// 2 (counted twice) when the state covers it and the source reads it
// again, 0 when neither does.
func (cc *cutCase) mixed() map[int64]keyCount {
	cuts := map[int64]map[int]int64{}
	resume := map[int]int64{}
	owner := map[int]int64{} // subtask -> restored point
	for _, s := range cc.v.wrong.steps {
		switch {
		case s.Note == "cut":
			if cuts[s.Point] == nil {
				cuts[s.Point] = map[int]int64{}
			}
			cuts[s.Point][s.Partition] = s.To
		case s.Input != "":
			resume[s.Partition] = s.To
		default:
			owner[s.Partition] = s.Point
		}
	}
	p := cc.v.wrong.cfg.Parallelism
	if len(resume) != len(cc.records) || len(owner) != p {
		cc.t.Fatalf("the log names the restore of %d partitions and %d counting subtasks: %+v", len(resume), len(owner), cc.v.wrong.steps)
	}
	return counts(cc.all(), func(r inputRecord) int64 {
		covered := int64(0)
		if pt := owner[keygroup.Owner(keygroup.Of(r.Key), p)]; pt > 0 {
			covered = cuts[pt][r.Partition]
		}
		return b2i(r.Offset < covered) + b2i(r.Offset >= resume[r.Partition])
	})
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
