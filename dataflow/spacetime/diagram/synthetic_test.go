package diagram

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// Synthetic recordings, shaped as each model's executor records its run:
// the renderers are tested against the contract, whatever an executor
// records today.

type builder struct{ rec Recording }

func (b *builder) lane(id, kind string, worker int) {
	b.rec.Lanes = append(b.rec.Lanes, spacetime.Lane{ID: id, Kind: kind, Worker: worker, Label: id})
}

func (b *builder) at(ms float64, e spacetime.Event) {
	e.T = time.Duration(ms * float64(time.Millisecond))
	b.rec.Events = append(b.rec.Events, e)
}

func (b *builder) batch(ms float64, from, to string, n int64, replay bool) {
	b.at(ms, spacetime.Event{Kind: spacetime.Batch, From: from, To: to, Records: n, Replay: replay})
}

// recordwiseJoin is a join on two inputs at parallelism 2: markers on
// every channel, a crash of worker 1 during point 3, point 2 restored and
// the sources replaying. Aligned, the join blocks each channel whose
// marker came first; unaligned, it keeps the records the marker overtook.
func recordwiseJoin(aligned bool) Recording {
	b := &builder{}
	srcs := []string{"src/orders/0", "src/orders/1", "src/payments/0", "src/payments/1"}
	for i, s := range srcs {
		b.lane(s, "source", i%2)
	}
	b.lane("op/join/0", "operator", 0)
	b.lane("op/join/1", "operator", 1)
	b.lane("sink/0", "sink", 0)
	b.lane("sink/1", "sink", 1)
	b.lane("coordinator", "coordinator", -1)
	joins := []string{"op/join/0", "op/join/1"}
	sinks := []string{"sink/0", "sink/1"}
	dead := func(ms float64, lane int) bool { return lane%2 == 1 && ms > 305 && ms < 320 }
	for t := 2.0; t < 430; t += 20 {
		replay := t >= 320 && t < 360
		for i, s := range srcs {
			if !dead(t, i) {
				b.batch(t+float64(i), s, joins[(int(t)/20+i)%2], int64(1+i%2), replay)
			}
		}
		for j := range joins {
			if !dead(t, j) {
				b.batch(t+8, joins[j], sinks[j], 1, replay)
			}
		}
	}
	checkpoint := func(id int64, t0 float64, cut bool) {
		for i, s := range srcs {
			if cut && i%2 == 1 {
				continue
			}
			b.at(t0+0.1*float64(i), spacetime.Event{Kind: spacetime.Marker, From: "coordinator", To: s, ID: id})
			b.at(t0+0.2, spacetime.Event{Kind: spacetime.SnapshotStart, Lane: s, ID: id})
			b.at(t0+3, spacetime.Event{Kind: spacetime.SnapshotDurable, Lane: s, ID: id})
		}
		if cut {
			return
		}
		for j, op := range joins {
			late := 6.0 + float64(j)
			for i, s := range srcs {
				arrive := t0 + 1 + float64(i)
				if i == 3 {
					arrive = t0 + late
				}
				ch := s + "->" + op
				b.at(arrive, spacetime.Event{Kind: spacetime.Marker, From: s, To: op, Channel: ch, ID: id})
				if aligned && i != 3 {
					b.at(arrive, spacetime.Event{Kind: spacetime.BlockStart, Lane: op, Channel: ch, ID: id})
					b.at(t0+late, spacetime.Event{Kind: spacetime.BlockEnd, Lane: op, Channel: ch, ID: id})
				}
			}
			snap := t0 + late
			if !aligned {
				snap = t0 + 1
				b.at(snap, spacetime.Event{Kind: spacetime.InFlight, Lane: op, Channel: srcs[3] + "->" + op, ID: id, Records: 2 + int64(j)})
			}
			b.at(snap, spacetime.Event{Kind: spacetime.SnapshotStart, Lane: op, ID: id})
			b.at(snap+4, spacetime.Event{Kind: spacetime.SnapshotDurable, Lane: op, ID: id})
			b.at(snap+0.5, spacetime.Event{Kind: spacetime.Marker, From: op, To: sinks[j], Channel: op + "->" + sinks[j], ID: id})
			b.at(snap+1, spacetime.Event{Kind: spacetime.SnapshotStart, Lane: sinks[j], ID: id})
			b.at(snap+5, spacetime.Event{Kind: spacetime.SnapshotDurable, Lane: sinks[j], ID: id})
		}
		b.at(t0+14, spacetime.Event{Kind: spacetime.PointComplete, ID: id, Lane: "coordinator"})
	}
	checkpoint(1, 100, false)
	checkpoint(2, 200, false)
	checkpoint(3, 300, true)
	b.at(305, spacetime.Event{Kind: spacetime.Crash, Worker: 1, Note: "worker 1 killed (worker=1,after-records=30)"})
	b.at(306, spacetime.Event{Kind: spacetime.PointFailed, ID: 3, Lane: "coordinator", Note: "cut short by a crash: worker 1 killed"})
	b.at(320, spacetime.Event{Kind: spacetime.Restore, ID: 2, Lane: "coordinator"})
	for _, s := range srcs {
		b.at(320, spacetime.Event{Kind: spacetime.ReplayStart, Lane: s})
		b.at(360, spacetime.Event{Kind: spacetime.ReplayEnd, Lane: s})
	}
	checkpoint(4, 400, false)
	return b.rec
}

// microbatchRun: seams every 50 ms with logged offsets, a commit per
// batch, a crash of worker 1 inside batch 3. With lineage the lost piece
// is rebuilt on the survivor; without, batch 3 is restored from batch 2's
// commit and re-run whole.
func microbatchRun(lineage bool) Recording {
	b := &builder{}
	b.lane("src/in/0", "source", 0)
	b.lane("src/in/1", "source", 1)
	b.lane("op/count/0", "operator", 0)
	b.lane("op/count/1", "operator", 1)
	b.lane("sink/0", "sink", 0)
	b.lane("driver", "coordinator", -1)
	ops := []string{"op/count/0", "op/count/1"}
	var off [2]int
	batch := func(id int64, t0 float64, replay bool, skipW1 bool) {
		next := [2]int{off[0] + 6, off[1] + 5}
		b.at(t0, spacetime.Event{Kind: spacetime.Seam, ID: id, Lane: "driver",
			Note: fmt.Sprintf("in/0 [%d,%d) in/1 [%d,%d)", off[0], next[0], off[1], next[1])})
		for i, src := range []string{"src/in/0", "src/in/1"} {
			if skipW1 && i == 1 {
				continue
			}
			for j, op := range ops {
				if skipW1 && j == 1 {
					continue
				}
				b.batch(t0+2+float64(i+2*j), src, op, 3, replay)
			}
		}
		for j, op := range ops {
			if !skipW1 || j == 0 {
				b.batch(t0+15+float64(j), op, "sink/0", 2, replay)
			}
		}
		off = next
	}
	for id := int64(1); id <= 2; id++ {
		batch(id, float64(id-1)*50, false, false)
		b.at(float64(id-1)*50+30, spacetime.Event{Kind: spacetime.Commit, ID: id, Lane: "driver"})
	}
	batch(3, 100, false, false)
	b.at(110, spacetime.Event{Kind: spacetime.Crash, Worker: 1, Note: "worker 1 killed inside batch 3"})
	if lineage {
		b.at(111, spacetime.Event{Kind: spacetime.PieceLost, ID: 3, Worker: 1, Lane: "op/count/1"})
		b.at(112, spacetime.Event{Kind: spacetime.ReplayStart, Lane: "op/count/0"})
		b.batch(113, "src/in/0", "op/count/0", 3, true)
		b.at(120, spacetime.Event{Kind: spacetime.PieceRebuilt, ID: 3, Lane: "op/count/0", Note: "from in/1 [5,10)"})
		b.at(120, spacetime.Event{Kind: spacetime.ReplayEnd, Lane: "op/count/0"})
		b.at(125, spacetime.Event{Kind: spacetime.Commit, ID: 3, Lane: "driver"})
		b.at(140, spacetime.Event{Kind: spacetime.Restore, ID: 3, Lane: "driver", Note: "replacement worker joins"})
	} else {
		b.at(120, spacetime.Event{Kind: spacetime.Restore, ID: 2, Lane: "driver"})
		off = [2]int{12, 10}
		for _, s := range []string{"src/in/0", "src/in/1"} {
			b.at(120, spacetime.Event{Kind: spacetime.ReplayStart, Lane: s})
			b.at(138, spacetime.Event{Kind: spacetime.ReplayEnd, Lane: s})
		}
		batch(3, 120, true, false)
		b.at(145, spacetime.Event{Kind: spacetime.Commit, ID: 3, Lane: "driver"})
	}
	for id := int64(4); id <= 5; id++ {
		batch(id, float64(id-1)*50, false, false)
		b.at(float64(id-1)*50+30, spacetime.Event{Kind: spacetime.Commit, ID: id, Lane: "driver"})
	}
	return b.rec
}

// diskphaseRun: finite job 1 maps in two units and reduces in two; worker
// 1 dies during reduce unit 4, so its map output is gone: unit 2 and unit
// 4 are re-run on worker 0 from the ledger. Job 2 runs clean.
func diskphaseRun() Recording {
	b := &builder{}
	b.lane("worker/0", "unit", 0)
	b.lane("worker/1", "unit", 1)
	b.lane("coordinator", "coordinator", -1)
	unit := func(id int64, lane, note string, t0, t1 float64, rerun bool) {
		b.at(t0, spacetime.Event{Kind: spacetime.UnitStart, ID: id, Lane: lane, Note: note, Rerun: rerun})
		b.at(t1, spacetime.Event{Kind: spacetime.UnitEnd, ID: id, Lane: lane, Note: note, Rerun: rerun})
		b.at(t1+1, spacetime.Event{Kind: spacetime.Ledger, ID: id, Lane: "coordinator", Note: note + " done"})
	}
	unit(1, "worker/0", "map", 5, 40, false)
	unit(2, "worker/1", "map", 5, 45, false)
	unit(3, "worker/0", "reduce", 50, 80, false)
	b.at(50, spacetime.Event{Kind: spacetime.UnitStart, ID: 4, Lane: "worker/1", Note: "reduce"})
	b.at(70, spacetime.Event{Kind: spacetime.Crash, Worker: 1, Note: "worker 1 killed in reduce unit 4"})
	b.at(85, spacetime.Event{Kind: spacetime.Restore, ID: 1, Lane: "coordinator", Note: "ledger of job 1"})
	unit(2, "worker/0", "map", 86, 115, true)
	unit(4, "worker/0", "reduce", 116, 140, true)
	b.at(145, spacetime.Event{Kind: spacetime.Commit, ID: 1, Lane: "coordinator"})
	unit(5, "worker/0", "map", 150, 180, false)
	unit(6, "worker/1", "map", 150, 185, false)
	unit(7, "worker/0", "reduce", 190, 220, false)
	unit(8, "worker/1", "reduce", 190, 225, false)
	b.at(230, spacetime.Event{Kind: spacetime.Commit, ID: 2, Lane: "coordinator"})
	return b.rec
}

// synthetic names every synthetic recording.
func synthetic() map[string]Recording {
	return map[string]Recording{
		"recordwise-aligned":     recordwiseJoin(true),
		"recordwise-unaligned":   recordwiseJoin(false),
		"microbatch-rerun-batch": microbatchRun(false),
		"microbatch-lineage":     microbatchRun(true),
		"diskphase":              diskphaseRun(),
	}
}

var allKinds = []string{spacetime.Batch, spacetime.Marker, spacetime.BlockStart, spacetime.BlockEnd,
	spacetime.SnapshotStart, spacetime.SnapshotDurable, spacetime.InFlight, spacetime.PointComplete,
	spacetime.PointFailed, spacetime.Seam, spacetime.Commit, spacetime.UnitStart, spacetime.UnitEnd,
	spacetime.Ledger, spacetime.Crash, spacetime.Restore, spacetime.ReplayStart, spacetime.ReplayEnd,
	spacetime.PieceLost, spacetime.PieceRebuilt, "some-future-kind"}

// randomRecording is any mix of kinds, lanes (declared or not), long
// labels and notes, for the properties every render must keep.
func randomRecording(r *rand.Rand) Recording {
	b := &builder{}
	nl := 1 + r.IntN(9)
	for i := range nl {
		id := fmt.Sprintf("lane/%d", i)
		if r.IntN(4) == 0 {
			id = fmt.Sprintf("a-rather-long-lane-name-for-operator/%d", i)
		}
		b.lane(id, []string{"source", "operator", "sink", "coordinator", "unit"}[r.IntN(5)], r.IntN(3)-1)
	}
	laneID := func() string {
		if r.IntN(10) == 0 {
			return "" // no lane, or one never declared
		}
		if r.IntN(20) == 0 {
			return "undeclared/" + fmt.Sprint(r.IntN(3))
		}
		return b.rec.Lanes[r.IntN(nl)].ID
	}
	end := 1 + r.IntN(5000)
	for range r.IntN(400) {
		// Now and then before the recorder's start: a clock read early.
		b.at(float64(r.IntN(end*1000)-r.IntN(2)*r.IntN(1000))/1000, spacetime.Event{
			Kind: allKinds[r.IntN(len(allKinds))], Lane: laneID(), From: laneID(), To: laneID(),
			Channel: laneID() + "->" + laneID(), Worker: r.IntN(3) - 1, ID: int64(r.IntN(6)) - 1,
			Records: int64(r.IntN(50)), Rerun: r.IntN(3) == 0, Replay: r.IntN(3) == 0,
			Note: []string{"", "map", "reduce", "a note <with> & \"markup\" that runs on and on past any sensible width"}[r.IntN(4)],
		})
	}
	return b.rec
}
