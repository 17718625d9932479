package microbatch

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// step feeds ev and fails the test on a refused event. It returns a copy
// of the actions: the machine reuses its buffer at the next Step.
func step(t *testing.T, m *Machine, ev Event) []Action {
	t.Helper()
	acts := m.Step(ev)
	for _, a := range acts {
		if f, ok := a.(Fail); ok {
			t.Fatalf("Step(%s): %v", ev, f.Err)
		}
	}
	return slices.Clone(acts)
}

// refused feeds ev and reports whether the machine refused it: a single
// Fail action, and the state as it was.
func refused(m *Machine, ev Event) bool {
	before := m.State()
	acts := m.Step(ev)
	if len(acts) != 1 || m.State() != before {
		return false
	}
	_, ok := acts[0].(Fail)
	return ok
}

func expect(t *testing.T, got []Action, want ...Action) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("actions %s, want %s", render(got), render(want))
	}
}

func render(as []Action) string {
	var b strings.Builder
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%T%+v", a, a)
	}
	return "[" + b.String() + "]"
}

// TestMachineOneBatch walks one batch through every state and checks that
// each durable step comes in protocol order behind its named crash point.
func TestMachineOneBatch(t *testing.T) {
	m := NewMachine(100 * time.Millisecond)
	expect(t, step(t, m, Started{Now: t0, LastCommitted: -1, Rerun: -1}), WaitUntil{At: t0})
	expect(t, step(t, m, Tick{Now: t0}), Plan{Batch: 0})
	if m.State() != Planning {
		t.Fatalf("state %s", m.State())
	}
	expect(t, step(t, m, Planned{}), Point{PointBeforeOffsets}, LogOffsets{0})
	expect(t, step(t, m, OffsetsLogged{}), Point{PointAfterOffsets}, Run{Batch: 0})
	// The sink flush and the state write run concurrently; the commit log
	// waits for both.
	expect(t, step(t, m, RunDone{}), FlushSink{0}, CommitState{0})
	if m.State() != Sealing {
		t.Fatalf("state %s", m.State())
	}
	expect(t, step(t, m, StateCommitted{}), Point{PointAfterState})
	expect(t, step(t, m, SinkDone{}), Point{PointAfterSink}, LogCommit{0})
	if m.Committed() != -1 {
		t.Fatal("committed before the commit entry is durable")
	}
	expect(t, step(t, m, CommitLogged{}), Point{PointAfterCommit}, Publish{0})
	if m.Committed() != 0 {
		t.Fatalf("committed %d after the commit entry", m.Committed())
	}
	// The next trigger is one interval after the previous one started,
	// however long the batch took.
	expect(t, step(t, m, Published{}), WaitUntil{At: t0.Add(100 * time.Millisecond)})
	expect(t, step(t, m, Tick{Now: t0.Add(300 * time.Millisecond)}), Plan{Batch: 1})
	expect(t, step(t, m, Planned{Empty: true}), WaitUntil{At: t0.Add(400 * time.Millisecond)})
	expect(t, step(t, m, Tick{Now: t0.Add(400 * time.Millisecond)}), Plan{Batch: 1})
	expect(t, step(t, m, Planned{Done: true}), Finish{})
	if m.State() != Finished {
		t.Fatalf("state %s", m.State())
	}
}

// aheadMachine brings a machine to batch 3 sealed, with the trigger of
// batch 4 due, and checks the plan ahead.
func aheadMachine(t *testing.T) *Machine {
	t.Helper()
	m := NewMachine(10 * time.Millisecond)
	step(t, m, Started{Now: t0, LastCommitted: 2, Rerun: -1})
	step(t, m, Tick{Now: t0})
	step(t, m, Planned{})
	step(t, m, OffsetsLogged{})
	step(t, m, RunDone{})
	expect(t, step(t, m, StateCommitted{Now: t0.Add(time.Millisecond)}), Point{PointAfterState})
	// Sealed after its trigger interval: batch 4 is planned before the
	// commit entry of batch 3 is written.
	expect(t, step(t, m, SinkDone{Now: t0.Add(12 * time.Millisecond)}), Point{PointAfterSink}, Plan{Batch: 4, Ahead: true})
	if m.State() != PlanningAhead {
		t.Fatalf("state %s", m.State())
	}
	return m
}

// TestMachinePlansAhead: a batch that overran its trigger has its commit
// entry written beside the next batch's offsets entry; the next batch runs
// only once both are durable and the batch before it is published.
func TestMachinePlansAhead(t *testing.T) {
	for _, order := range []string{"commit first", "offsets first"} {
		t.Run(order, func(t *testing.T) {
			m := aheadMachine(t)
			expect(t, step(t, m, Planned{}), Point{PointBeforeOffsets}, LogCommit{3}, LogOffsets{4})
			if order == "offsets first" {
				expect(t, step(t, m, OffsetsLogged{}))
				expect(t, step(t, m, CommitLogged{}), Point{PointAfterCommit}, Publish{3})
				expect(t, step(t, m, Published{}), Point{PointAfterOffsets}, Run{Batch: 4})
			} else {
				expect(t, step(t, m, CommitLogged{}), Point{PointAfterCommit}, Publish{3})
				if !refused(m, RunDone{}) {
					t.Fatal("RunDone accepted before batch 4 ran")
				}
				expect(t, step(t, m, Published{}))
				if m.State() != LoggingOffsets || m.Batch() != 4 {
					t.Fatalf("state %s batch %d, want logging-offsets of 4", m.State(), m.Batch())
				}
				expect(t, step(t, m, OffsetsLogged{}), Point{PointAfterOffsets}, Run{Batch: 4})
			}
			if m.Committed() != 3 {
				t.Fatalf("committed %d", m.Committed())
			}
			// The plan ahead consumed the trigger that was due.
			expect(t, step(t, m, RunDone{}), FlushSink{4}, CommitState{4})
			step(t, m, StateCommitted{Now: t0.Add(13 * time.Millisecond)})
			expect(t, step(t, m, SinkDone{Now: t0.Add(14 * time.Millisecond)}), Point{PointAfterSink}, LogCommit{4})
		})
	}
	// Nothing to run ahead: the commit is logged alone.
	m := aheadMachine(t)
	expect(t, step(t, m, Planned{Empty: true}), LogCommit{3})
	expect(t, step(t, m, CommitLogged{}), Point{PointAfterCommit}, Publish{3})
	expect(t, step(t, m, Published{}), WaitUntil{At: t0.Add(10 * time.Millisecond)})
}

// TestMachineWorkerLostAhead: a worker lost while a batch is planned ahead.
// The I/O loop reports what finished in flight; the plan ahead survives
// only if the batch before it is committed and its own offsets are durable.
func TestMachineWorkerLostAhead(t *testing.T) {
	cases := []struct {
		name     string
		planned  bool
		finished []Event
		rebuild  Rebuild
		after    []Action
	}{
		{"planning ahead", false, nil,
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"nothing landed", true, nil,
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"only the offsets ahead landed", true, []Event{OffsetsLogged{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"only the commit landed", true, []Event{CommitLogged{}},
			Rebuild{LastCommitted: 3, Failed: -1, Discarded: 4, Ahead: -1}, []Action{Publish{3}}},
		{"both landed", true, []Event{CommitLogged{}, OffsetsLogged{}},
			Rebuild{LastCommitted: 3, Failed: -1, Discarded: -1, Ahead: 4}, []Action{Publish{3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := aheadMachine(t)
			if c.planned {
				step(t, m, Planned{})
			}
			expect(t, step(t, m, WorkerLost{Now: t0, Finished: c.finished}), c.rebuild)
			expect(t, step(t, m, Rebuilt{Now: t0}), c.after...)
			if c.rebuild.Ahead >= 0 {
				expect(t, step(t, m, Published{}), Point{PointAfterOffsets}, Run{Batch: 4})
			} else if c.rebuild.LastCommitted == 3 {
				expect(t, step(t, m, Published{}), WaitUntil{At: t0.Add(10 * time.Millisecond)})
			}
		})
	}
	// Lost while the offsets ahead are still in flight after the publish.
	m := aheadMachine(t)
	step(t, m, Planned{})
	step(t, m, CommitLogged{})
	step(t, m, Published{})
	expect(t, step(t, m, WorkerLost{Now: t0, Finished: []Event{OffsetsLogged{}}}),
		Rebuild{LastCommitted: 3, Failed: 4, Discarded: -1, Ahead: -1})
	expect(t, step(t, m, Rebuilt{Now: t0}), Run{Batch: 4, Rerun: true})
}

// TestMachineSealingEitherOrder: the sink may finish before the state
// write; the commit log still waits for both, and each half is reported
// once.
func TestMachineSealingEitherOrder(t *testing.T) {
	m := NewMachine(time.Millisecond)
	step(t, m, Started{Now: t0, LastCommitted: -1, Rerun: -1})
	step(t, m, Tick{Now: t0})
	step(t, m, Planned{})
	step(t, m, OffsetsLogged{})
	expect(t, step(t, m, RunDone{}), FlushSink{0}, CommitState{0})
	expect(t, step(t, m, SinkDone{}), Point{PointAfterSink})
	if !refused(m, SinkDone{}) {
		t.Fatal("a second SinkDone was accepted")
	}
	if !refused(m, CommitLogged{}) {
		t.Fatal("CommitLogged accepted before the state write finished")
	}
	expect(t, step(t, m, StateCommitted{}), Point{PointAfterState}, LogCommit{0})
	if !refused(m, StateCommitted{}) {
		t.Fatal("StateCommitted accepted while logging the commit")
	}
}

// TestMachineRejectsEventsOutOfOrder: the I/O loop cannot skip a step.
func TestMachineRejectsEventsOutOfOrder(t *testing.T) {
	m := NewMachine(time.Millisecond)
	step(t, m, Started{Now: t0, LastCommitted: 4, Rerun: -1})
	step(t, m, Tick{Now: t0})
	step(t, m, Planned{})
	for _, ev := range []Event{RunDone{}, StateCommitted{}, SinkDone{}, CommitLogged{}, Published{}, Tick{Now: t0}} {
		if !refused(m, ev) {
			t.Errorf("%T accepted while logging offsets", ev)
		}
	}
	if !refused(NewMachine(time.Millisecond), Started{Now: t0, LastCommitted: 3, Rerun: 5}) {
		t.Error("a rerun that does not follow the committed batch was accepted")
	}
}

// TestMachineRestartRerunsLoggedBatch: a restart with an uncommitted
// logged batch re-runs it (never re-plans it), passing the after-offsets
// point again so a second crash there is possible.
func TestMachineRestartRerunsLoggedBatch(t *testing.T) {
	m := NewMachine(time.Millisecond)
	expect(t, step(t, m, Started{Now: t0, LastCommitted: 6, Rerun: 7}), Point{PointAfterOffsets}, Run{Batch: 7, Rerun: true})
	expect(t, step(t, m, RunDone{}), FlushSink{7}, CommitState{7})
	m = NewMachine(time.Millisecond)
	expect(t, step(t, m, Started{Now: t0, LastCommitted: 6, Rerun: -1}), WaitUntil{At: t0})
	expect(t, step(t, m, Tick{Now: t0}), Plan{Batch: 7})
}

// TestMachineWorkerLost: what a lost worker costs in every state.
func TestMachineWorkerLost(t *testing.T) {
	// drive brings a fresh machine to the state reached after evs.
	drive := func(evs ...Event) *Machine {
		m := NewMachine(time.Millisecond)
		step(t, m, Started{Now: t0, LastCommitted: 2, Rerun: -1})
		for _, ev := range evs {
			step(t, m, ev)
		}
		return m
	}
	lost := WorkerLost{Now: t0}
	cases := []struct {
		name      string
		evs       []Event
		rebuild   Rebuild
		afterwith []Action
	}{
		{"idle", nil, Rebuild{LastCommitted: 2, Failed: -1, Discarded: -1, Ahead: -1}, []Action{WaitUntil{At: t0}}},
		{"planning", []Event{Tick{t0}}, Rebuild{LastCommitted: 2, Failed: -1, Discarded: -1, Ahead: -1}, []Action{WaitUntil{At: t0}}},
		{"planned, not logged", []Event{Tick{t0}, Planned{}}, Rebuild{LastCommitted: 2, Failed: -1, Discarded: 3, Ahead: -1}, []Action{WaitUntil{At: t0}}},
		{"logged, not run", []Event{Tick{t0}, Planned{}, OffsetsLogged{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"run", []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"state written", []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}, StateCommitted{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"sink flushed, state not written", []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}, SinkDone{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"sink flushed", []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}, StateCommitted{}, SinkDone{}},
			Rebuild{Rollback: true, LastCommitted: 2, Failed: 3, Discarded: -1, Ahead: -1}, []Action{Run{Batch: 3, Rerun: true}}},
		{"committed", []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}, StateCommitted{}, SinkDone{}, CommitLogged{}},
			Rebuild{LastCommitted: 3, Failed: -1, Discarded: -1, Ahead: -1}, []Action{Publish{3}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := drive(c.evs...)
			expect(t, step(t, m, lost), c.rebuild)
			// A second loss before the rebuild ran is covered by it.
			expect(t, step(t, m, lost))
			expect(t, step(t, m, Rebuilt{Now: t0}), c.afterwith...)
		})
	}
}

// TestMachineLateOffsetsVariant pins down the deliberately broken order
// the late-offsets test relies on: offsets are logged after the sink.
func TestMachineLateOffsetsVariant(t *testing.T) {
	m := NewMachine(time.Millisecond)
	m.lateOffsets = true
	step(t, m, Started{Now: t0, LastCommitted: -1, Rerun: -1})
	step(t, m, Tick{Now: t0})
	expect(t, step(t, m, Planned{}), Run{Batch: 0})
	expect(t, step(t, m, RunDone{}), FlushSink{0}, CommitState{0})
	expect(t, step(t, m, StateCommitted{}), Point{PointAfterState})
	expect(t, step(t, m, SinkDone{}), Point{PointAfterSink}, Point{PointBeforeOffsets}, LogOffsets{0})
	expect(t, step(t, m, OffsetsLogged{}), Point{PointAfterOffsets}, LogCommit{0})
}

// TestMachineEveryPointOncePerAttempt: walking a batch passes every
// coordinator point of the machine exactly once, in protocol order.
func TestMachineEveryPointOncePerAttempt(t *testing.T) {
	m := NewMachine(time.Millisecond)
	var points []string
	collect := func(as []Action) {
		for _, a := range as {
			if p, ok := a.(Point); ok {
				points = append(points, p.Name)
			}
		}
	}
	collect(step(t, m, Started{Now: t0, LastCommitted: -1, Rerun: -1}))
	for _, ev := range []Event{Tick{t0}, Planned{}, OffsetsLogged{}, RunDone{}, StateCommitted{}, SinkDone{}, CommitLogged{}, Published{}} {
		collect(step(t, m, ev))
	}
	want := []string{PointBeforeOffsets, PointAfterOffsets, PointAfterState, PointAfterSink, PointAfterCommit}
	if !reflect.DeepEqual(points, want) {
		t.Fatalf("points %v, want %v", points, want)
	}
	// The mid-write points and the mid-run point live inside the actions.
	for _, p := range failPoints {
		found := false
		for _, q := range append(want, PointOffsetsMidWrite, PointStateMidWrite, PointSinkMidWrite, PointCommitMidWrite, PointMidRun) {
			found = found || p == q
		}
		if !found {
			t.Errorf("fail point %s is not placed anywhere", p)
		}
	}
}

func TestPlanRestart(t *testing.T) {
	cases := []struct {
		name    string
		names   []string
		want    RestartPlan
		wantErr string
	}{
		{"empty", nil, RestartPlan{LastCommitted: -1, Rerun: -1, Next: 0}, ""},
		{"first batch logged", []string{offsetsName(0)}, RestartPlan{LastCommitted: -1, Rerun: 0, Next: 1}, ""},
		{"all committed", []string{offsetsName(3), offsetsName(4), commitName(3), commitName(4), manifestName(4)},
			RestartPlan{LastCommitted: 4, Rerun: -1, Next: 5}, ""},
		{"one uncommitted", []string{offsetsName(3), offsetsName(4), offsetsName(5), commitName(3), commitName(4)},
			RestartPlan{LastCommitted: 4, Rerun: 5, Next: 6}, ""},
		{"leftover state of the uncommitted batch is ignored", []string{offsetsName(4), offsetsName(5), commitName(4),
			manifestName(5), stateObjectName(5, "count")}, RestartPlan{LastCommitted: 4, Rerun: 5, Next: 6}, ""},
		{"one uncommitted, one planned ahead of its commit", []string{offsetsName(4), offsetsName(5), offsetsName(6), commitName(4)},
			RestartPlan{LastCommitted: 4, Rerun: 5, Next: 6}, ""},
		{"three uncommitted", []string{offsetsName(4), offsetsName(5), offsetsName(6), offsetsName(7), commitName(4)}, RestartPlan{}, "damaged"},
		{"planned ahead of a batch never logged", []string{offsetsName(4), offsetsName(6), commitName(4)}, RestartPlan{}, "damaged"},
		{"commit without offsets", []string{offsetsName(3), commitName(3), commitName(4)}, RestartPlan{}, "without offsets"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanRestart(ParseListing(c.names))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestParseListingKeepsUnknownNames(t *testing.T) {
	l := ParseListing([]string{"offsets/7", "commits/" + batchName(2) + "x", "state/nope", offsetsName(1)})
	if len(l.Offsets) != 1 || l.Offsets[0] != 1 || len(l.Unknown) != 3 {
		t.Fatalf("listing %+v", l)
	}
}

func TestRetentionDeletes(t *testing.T) {
	var names []string
	for b := int64(0); b <= 20; b++ {
		names = append(names, offsetsName(b), commitName(b), manifestName(b), stateObjectName(b, "count"))
	}
	names = append(names, offsetsName(21), stateObjectName(21, "count")) // batch 21 in flight
	l := ParseListing(names)
	// Keep 5 batches (16..20); commit 16 names version 15, whose manifest
	// builds on the full snapshot at 12.
	del := RetentionDeletes(l, RetentionInput{LastCommitted: 20, Keep: 5, OldestLiveManifest: 15, MinLiveObject: 12})
	gone := map[string]bool{}
	for _, d := range del {
		gone[d] = true
	}
	for b := int64(0); b <= 21; b++ {
		checks := []struct {
			name string
			keep bool
		}{
			{offsetsName(b), b >= 16},
			{commitName(b), b >= 16 || b == 21},
			{manifestName(b), b >= 15},
			{stateObjectName(b, "count"), b >= 12},
		}
		for _, c := range checks {
			if gone[c.name] == c.keep {
				t.Errorf("%s: deleted=%v, want kept=%v", c.name, gone[c.name], c.keep)
			}
		}
	}
	// Keeping one batch never deletes the entries of the committed batch.
	del = RetentionDeletes(l, RetentionInput{LastCommitted: 20, Keep: 1, OldestLiveManifest: 20, MinLiveObject: 20})
	for _, d := range del {
		if d == offsetsName(20) || d == commitName(20) || d == offsetsName(21) || d == manifestName(20) {
			t.Errorf("deleted %s", d)
		}
	}
	// No state at all: manifests and objects older than the kept window go.
	del = RetentionDeletes(l, RetentionInput{LastCommitted: 20, Keep: 3, OldestLiveManifest: -1})
	gone = map[string]bool{}
	for _, d := range del {
		gone[d] = true
	}
	if !gone[manifestName(17)] || gone[manifestName(18)] || !gone[stateObjectName(17, "count")] || gone[stateObjectName(18, "count")] {
		t.Errorf("stateless retention deleted %v", del)
	}
}

func TestFairShare(t *testing.T) {
	cases := []struct {
		avail []int64
		lim   int64
		want  []int64
	}{
		{[]int64{10, 10, 10}, 15, []int64{5, 5, 5}},
		{[]int64{2, 100, 100}, 50, []int64{2, 24, 24}},
		{[]int64{0, 7}, 5, []int64{0, 5}},
		{[]int64{3, 3}, 100, []int64{3, 3}},
	}
	for _, c := range cases {
		got := fairShare(c.avail, c.lim)
		var sum int64
		for i := range got {
			sum += got[i]
			if got[i] > c.avail[i] {
				t.Errorf("fairShare(%v, %d) = %v takes more than available", c.avail, c.lim, got)
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("fairShare(%v, %d) = %v, want %v", c.avail, c.lim, got, c.want)
		}
	}
}
