package operator_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// changeMirror is what an executor keeps from change hand-overs: per key
// group, rows by entry key (entries) or the group's rows (whole).
type changeMirror map[int][][]int64

func (m changeMirror) clone() changeMirror {
	out := changeMirror{}
	for kg, rows := range m {
		out[kg] = slices.Clone(rows)
	}
	return out
}

// apply folds hand-over c into m, checking the hand-over's own promises.
func (m changeMirror) apply(t *testing.T, ctx string, c operator.StateChanges) {
	t.Helper()
	last := -1
	for _, g := range c.Groups {
		if g.KeyGroup <= last {
			t.Fatalf("%s: key group %d after %d: not in key-group order", ctx, g.KeyGroup, last)
		}
		last = g.KeyGroup
		rows := winRowsOf(t, g.Batch)
		if !g.Entries {
			if len(rows) == 0 {
				delete(m, g.KeyGroup)
			} else {
				m[g.KeyGroup] = rows
			}
			continue
		}
		cur := m[g.KeyGroup]
		seen := map[int64]bool{}
		for _, r := range rows {
			k := r[c.KeyColumn]
			if seen[k] {
				t.Fatalf("%s: key %d handed over twice in key group %d", ctx, k, g.KeyGroup)
			}
			seen[k] = true
			i := slices.IndexFunc(cur, func(x []int64) bool { return x[c.KeyColumn] == k })
			if i < 0 {
				cur = append(cur, r)
			} else {
				cur[i] = r
			}
		}
		m[g.KeyGroup] = cur
		if len(cur) != g.Rows {
			t.Fatalf("%s: key group %d: hand-over says %d entries, the mirror holds %d", ctx, g.KeyGroup, g.Rows, len(cur))
		}
	}
}

// TestChangeSnapshotsRebuildState drives every ChangeSnapshotter with
// random input and folds each hand-over into a mirror; a hand-over is
// "durable" (acknowledged, the mirror kept) or "failed" (neither) at
// random. After every hand-over the mirror must equal the full Snapshot
// (but for the watermark column of groups not handed over), so nothing a
// failed version held is lost.
func TestChangeSnapshotsRebuildState(t *testing.T) {
	seed := testseed.Seed(t)
	for kind, newOp := range restoreFuzzOps {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(kind)))
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ports := 1
			if kind == 2 {
				ports = 2
			}
			cfg := winGenConfig{ports: ports, partsPerPort: 1 + rng.IntN(3), rowsPerPart: 100 + rng.IntN(300),
				keys: 1 + rng.Int64N(400), disorder: rng.Int64N(20), maxStep: 1 + rng.Int64N(8),
				tsStart: -rng.Int64N(300), maxChunk: 1 + rng.IntN(30)}
			events, _ := winGenerate(rng, cfg)
			h := newWinHarness(t, mem, winInSchema, newOp)
			h.start(nil, keygroup.All)
			op := h.insts[0].op.(operator.ChangeSnapshotter)
			defer op.Close()
			uni := -1
			if idx := op.StateSchema().FieldIndices("watermark"); len(idx) == 1 {
				uni = idx[0]
			}
			durable := changeMirror{}
			var acked, lastSeq uint64
			failed, snaps := 0, 0
			for i, ev := range events {
				h.apply(ev)
				if rng.IntN(4) != 0 && i != len(events)-1 {
					continue
				}
				if err := op.Flush(h.out); err != nil {
					t.Fatal(err)
				}
				c, err := op.SnapshotChanges()
				if err != nil {
					t.Fatal(err)
				}
				ctx := fmt.Sprintf("seed %d event %d", seed, i)
				if c.Seq <= lastSeq {
					t.Fatalf("%s: sequence %d after %d", ctx, c.Seq, lastSeq)
				}
				lastSeq = c.Seq
				next := durable.clone()
				next.apply(t, ctx, c)
				operator.ReleaseChanges(c)
				parts, err := op.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				want := winStateRows(t, parts, op.StateSchema())
				operator.ReleaseStates(parts)
				compareIgnoring(t, ctx, next, want, uni)
				snaps++
				if rng.IntN(3) == 0 {
					failed++ // not durable: no ack, the mirror forgets it
					continue
				}
				durable = next
				acked = c.Seq
				op.AckChanges(acked)
			}
			if snaps < 3 || failed == 0 && len(events) > 20 {
				t.Logf("seed %d: only %d hand-overs, %d failed", seed, snaps, failed)
			}
		})
	}
}

// compareIgnoring compares states as multisets of rows per group, without
// column uniform (-1: none).
func compareIgnoring(t *testing.T, ctx string, got, want map[int][][]int64, uniform int) {
	t.Helper()
	strip := func(m map[int][][]int64) map[int][][]int64 {
		out := map[int][][]int64{}
		for kg, rows := range m {
			for _, r := range rows {
				r = slices.Clone(r)
				if uniform >= 0 {
					r[uniform] = 0
				}
				out[kg] = append(out[kg], r)
			}
			slices.SortFunc(out[kg], slices.Compare)
		}
		return out
	}
	g, w := strip(got), strip(want)
	for kg := range keygroup.Count {
		if !slices.EqualFunc(g[kg], w[kg], slices.Equal) {
			t.Fatalf("%s: key group %d: hand-overs rebuild %v, the state is %v", ctx, kg, g[kg], w[kg])
		}
	}
}
