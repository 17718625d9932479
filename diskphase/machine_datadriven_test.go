package diskphase

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestMachineScripts runs the scripts in testdata/machine. Each command is
// one event fed to the machine, or a change to the world around it
// (machine, restart, forget). The expected output is the actions the
// event returns, one per line, then the units that are not done and the
// workers. The harness keeps "durable storage" the way the coordinator
// does: a plan, ledger entry or commit becomes durable when the script
// acknowledges the action that wrote it. Rewrite with -rewrite.
func TestMachineScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/machine", func(t *testing.T, path string) {
		h := &scriptWorld{}
		datadriven.RunTest(t, path, h.run)
	})
}

type scriptWorld struct {
	cfg     machineConfig
	inc     int
	m       *machine
	durable *durableState
	// What the last actions asked for, until acknowledged.
	plans   map[int]JobPlan
	runs    map[UnitID]actRun
	records map[UnitID]actRecord
	commits map[int]JobCommit
}

func (h *scriptWorld) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "machine":
		splits, par := 1, 1
		mode := modeWhole
		d.MaybeScanArgs(t, "splits", &splits)
		d.MaybeScanArgs(t, "parallelism", &par)
		d.MaybeScanArgs(t, "mode", &mode)
		h.cfg = baseConfig(splits, par, mode, 0)
		d.MaybeScanArgs(t, "per-split", &h.cfg.perSplit)
		d.MaybeScanArgs(t, "workers", &h.cfg.workers)
		d.MaybeScanArgs(t, "max-loss", &h.cfg.maxLoss)
		h.cfg.mapOnly = d.HasArg("map-only")
		h.cfg.stateful = !d.HasArg("stateless") && !h.cfg.mapOnly
		h.durable, h.inc = emptyDurable(), 0
		return h.restore()
	case "restart":
		// The coordinator died: only durable storage is left.
		h.inc++
		return h.restore()
	case "forget":
		// Durable storage loses a ledger entry (damage, not the protocol).
		u := scriptUnit(t, d, "unit")
		delete(h.durable.maps, u)
		delete(h.durable.reduces, u)
		return "ok\n"
	}
	if h.m == nil {
		d.Fatalf(t, "%s before a machine is restored", d.Cmd)
	}
	ev := h.event(t, d)
	var b strings.Builder
	for _, a := range h.m.Step(ev) {
		h.remember(a)
		fmt.Fprintln(&b, a)
	}
	b.WriteString(h.status())
	return b.String()
}

// restore builds a new incarnation from durable storage.
func (h *scriptWorld) restore() string {
	h.plans, h.runs, h.records, h.commits = map[int]JobPlan{}, map[UnitID]actRun{}, map[UnitID]actRecord{}, map[int]JobCommit{}
	m, err := restore(h.cfg, h.inc, h.durable)
	if err != nil {
		h.m = nil
		var gap HistoryGapError
		if errors.As(err, &gap) {
			return fmt.Sprintf("restore refused: %v\n", gap)
		}
		return fmt.Sprintf("restore failed: %v\n", err)
	}
	h.m = m
	return fmt.Sprintf("incarnation %d restored\n%s", h.inc, h.status())
}

// remember notes what an action asked for, so an acknowledgement can make
// it durable and a report can name the attempt.
func (h *scriptWorld) remember(a action) {
	switch a := a.(type) {
	case actPersistPlan:
		h.plans[a.Plan.Job] = a.Plan
	case actRun:
		h.runs[a.Unit] = a
	case actRecord:
		h.records[a.Unit] = a
	case actCommit:
		h.commits[a.Job] = a.Commit
	}
}

func (h *scriptWorld) event(t *testing.T, d *datadriven.TestData) event {
	// attempt: the attempt of the unit's last Run, unless given.
	run := func(u UnitID) actRun {
		r, ok := h.runs[u]
		if !ok {
			d.Fatalf(t, "%s was not dispatched", u)
		}
		d.MaybeScanArgs(t, "attempt", &r.Attempt)
		return r
	}
	job := func() int {
		var j int
		d.ScanArgs(t, "job", &j)
		return j
	}
	switch d.Cmd {
	case "started":
		return evStarted{}
	case "plan-persisted":
		j := job()
		h.durable.plans[j] = h.plans[j]
		return evPlanPersisted{Job: j}
	case "succeeded":
		u := scriptUnit(t, d, "unit")
		r := run(u)
		ev := evAttemptSucceeded{Unit: u, Attempt: r.Attempt}
		var files []string
		if arg, ok := d.Arg("files"); ok {
			files = arg.Vals
		}
		if u.Kind == kindMap {
			e := &MapEntry{Start: r.Map.Start}
			d.ScanArgs(t, "end", &e.End)
			e.Records = e.End - e.Start
			e.EOF = d.HasArg("eof")
			e.MaxTS = e.End - 1
			for _, f := range files {
				e.Files = append(e.Files, scriptFile(f))
			}
			ev.Map = e
		} else {
			var out, state string
			d.ScanArgs(t, "out", &out)
			e := &ReduceEntry{Out: scriptFile(out)}
			if d.MaybeScanArgs(t, "state", &state) {
				ref := scriptFile(state)
				e.State = &ref
			}
			ev.Reduce = e
		}
		return ev
	case "crashed":
		u := scriptUnit(t, d, "unit")
		r := run(u)
		return evAttemptCrashed{Unit: u, Attempt: r.Attempt, Worker: r.Worker}
	case "worker-lost", "worker-up":
		var w int
		d.ScanArgs(t, "worker", &w)
		if d.Cmd == "worker-up" {
			return evWorkerUp{Worker: w}
		}
		return evWorkerLost{Worker: w}
	case "file-bad":
		u := scriptUnit(t, d, "unit")
		var file string
		d.ScanArgs(t, "file", &file)
		return evFileBad{Unit: u, Attempt: run(u).Attempt, Producer: scriptUnit(t, d, "producer"), File: file}
	case "recorded":
		u := scriptUnit(t, d, "unit")
		rec, ok := h.records[u]
		if !ok {
			d.Fatalf(t, "%s has no ledger entry being written", u)
		}
		if rec.Map != nil {
			h.durable.maps[u] = rec.Map
		} else {
			h.durable.reduces[u] = rec.Reduce
		}
		return evLedgerRecorded{Unit: u, Attempt: rec.Attempt}
	case "committed":
		j := job()
		c := h.commits[j]
		h.durable.commits[j] = &c
		return evCommitted{Job: j}
	case "commit-file-bad":
		var file string
		d.ScanArgs(t, "file", &file)
		return evCommitFileBad{Job: job(), Producer: scriptUnit(t, d, "producer"), File: file}
	case "failed":
		u := scriptUnit(t, d, "unit")
		var msg string
		d.ScanArgs(t, "err", &msg)
		return evAttemptFailed{Unit: u, Attempt: run(u).Attempt, Err: errors.New(msg)}
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return nil
}

// status prints every unit that is not done, job by job, and the workers.
func (h *scriptWorld) status() string {
	m := h.m
	var b strings.Builder
	for j := 0; j <= m.cur; j++ {
		js := m.jobs[j]
		if js == nil {
			continue
		}
		var open []string
		units := make([]*unitState, 0, len(js.order)+len(js.reduces))
		for _, s := range js.order {
			units = append(units, js.maps[s])
		}
		units = append(units, js.reduces...)
		for _, u := range units {
			if u.status != stDone {
				open = append(open, fmt.Sprintf("%s=%s", u.id, statusNames[u.status]))
			}
		}
		phase := "planning"
		switch {
		case js.committed:
			phase = "committed"
		case js.committing:
			phase = "committing"
		case js.planned:
			phase = "planned"
		}
		if phase == "committed" && len(open) == 0 {
			continue
		}
		if len(open) == 0 {
			fmt.Fprintf(&b, "job %d %s\n", j, phase)
			continue
		}
		fmt.Fprintf(&b, "job %d %s: %s\n", j, phase, strings.Join(open, " "))
	}
	ws := make([]string, len(m.workers))
	for w, s := range m.workers {
		switch {
		case !s.alive:
			ws[w] = fmt.Sprintf("w%d=dead", w)
		case s.busy:
			ws[w] = fmt.Sprintf("w%d=%s", w, s.unit)
		default:
			ws[w] = fmt.Sprintf("w%d=idle", w)
		}
	}
	fmt.Fprintf(&b, "workers: %s\n", strings.Join(ws, " "))
	return b.String()
}

var statusNames = [...]string{stPending: "pending", stRunning: "running", stFinishing: "finishing", stDone: "done"}

// scriptUnit reads a unit written as j0/map-1 or j0/reduce-0.
func scriptUnit(t *testing.T, d *datadriven.TestData, key string) UnitID {
	var s string
	d.ScanArgs(t, key, &s)
	var u UnitID
	var kind string
	if _, err := fmt.Sscanf(strings.Replace(s, "-", " ", 1), "j%d/%s %d", &u.Job, &kind, &u.Index); err != nil {
		d.Fatalf(t, "%s=%s: want j<job>/map-<split> or j<job>/reduce-<partition>", key, s)
	}
	switch kind {
	case "map":
		u.Kind = kindMap
	case "reduce":
		u.Kind = kindReduce
	default:
		d.Fatalf(t, "%s=%s: unknown unit kind %q", key, s, kind)
	}
	return u
}

// scriptFile is a file of one row; "-" is an empty table.
func scriptFile(name string) FileRef {
	if name == "-" {
		return FileRef{}
	}
	return FileRef{Name: name, Rows: 1}
}
