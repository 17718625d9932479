package diskphase

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// The machine is tested without goroutines, clocks or storage: a simulated
// world carries out its actions, keeps "durable storage" as plain maps, and
// injects crashes, lost files and coordinator restarts between any two
// steps.

// span is a range of records of one split.
type span struct {
	split    int
	from, to int64
}

type world struct {
	t    testing.TB
	rng  *rand.Rand
	cfg  machineConfig
	size []int64
	m    *machine
	inc  int

	durable *durableState
	files   map[string][]span // what each existing file holds
	flights []*flight
	queue   []event
	// acts are the machine's actions not yet carried out.
	acts []action

	// mayRerun: recorded units one of whose files is gone, so a re-run is
	// legitimate.
	mayRerun map[UnitID]bool
	// committed[j][subtask] is what job j's commit wrote.
	committed  map[int]map[int][]span
	commitPuts map[int]int
	// starts counts attempts per unit; interrupted those cut short.
	starts, interrupted, lossReruns map[UnitID]int
	stats                           struct{ restarts, crashes, losses, steps int }
}

type flight struct {
	act actRun
}

func newWorld(t testing.TB, seed uint64, cfg machineConfig, size []int64) *world {
	w := &world{t: t, rng: rand.New(rand.NewPCG(seed, 99)), cfg: cfg, size: size, durable: emptyDurable(),
		files: map[string][]span{}, mayRerun: map[UnitID]bool{}, committed: map[int]map[int][]span{},
		commitPuts: map[int]int{}, starts: map[UnitID]int{}, interrupted: map[UnitID]int{}, lossReruns: map[UnitID]int{}}
	w.restart()
	return w
}

func (w *world) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("step %d: "+format, append([]any{w.stats.steps}, args...)...)
}

// restart drops the coordinator's memory and every attempt it started,
// and restores a new one from durable state.
func (w *world) restart() {
	if w.m != nil {
		for _, f := range w.flights {
			if !w.recorded(f.act.Unit) || w.mayRerun[f.act.Unit] {
				w.interrupted[f.act.Unit]++
			}
		}
		// Units that succeeded but were not recorded are interrupted too.
		for _, u := range w.m.inFlight() {
			if w.m.unit(u).status == stFinishing {
				w.interrupted[u]++
			}
		}
		w.stats.restarts++
	}
	w.flights, w.queue, w.acts = nil, nil, nil
	m, err := restore(w.cfg, w.inc, w.durable)
	if err != nil {
		w.fatalf("restore: %v", err)
	}
	w.inc++
	w.m = m
	w.feed(evStarted{})
}

// feed steps the machine and queues its actions (copied: the machine
// reuses its buffer).
func (w *world) feed(ev event) { w.acts = append(w.acts, w.m.Step(ev)...) }

func (w *world) recorded(u UnitID) bool {
	if u.Kind == kindMap {
		return w.durable.maps[u] != nil
	}
	return w.durable.reduces[u] != nil
}

// drain carries out actions until the machine is quiet. With probability
// pCrash per action the coordinator crashes right after (or before) an
// action's durable effect.
func (w *world) drain(pCrash float64) {
	for {
		if len(w.acts) == 0 {
			if len(w.queue) == 0 {
				return
			}
			ev := w.queue[0]
			w.queue = w.queue[1:]
			w.feed(ev)
			continue
		}
		a := w.acts[0]
		w.acts = w.acts[1:]
		if w.rng.Float64() < pCrash/2 {
			w.restart()
			return
		}
		w.exec(a)
		if w.m.finished {
			return
		}
		if w.rng.Float64() < pCrash/2 {
			w.restart()
			return
		}
	}
}

func (w *world) exec(a action) {
	switch a := a.(type) {
	case actPersistPlan:
		if _, ok := w.durable.plans[a.Plan.Job]; ok && !slices.Equal(w.durable.plans[a.Plan.Job].Starts, a.Plan.Starts) {
			w.fatalf("job %d planned twice with different starts", a.Plan.Job)
		}
		w.durable.plans[a.Plan.Job] = a.Plan
		w.queue = append(w.queue, evPlanPersisted{Job: a.Plan.Job})
	case actRun:
		if w.recorded(a.Unit) {
			if !w.mayRerun[a.Unit] {
				w.fatalf("unit %s is in the ledger and was dispatched again", a.Unit)
			}
			w.lossReruns[a.Unit]++
		}
		w.starts[a.Unit]++
		w.flights = append(w.flights, &flight{act: a})
	case actRecord:
		if a.Map != nil {
			w.durable.maps[a.Unit] = a.Map
		} else {
			w.durable.reduces[a.Unit] = a.Reduce
		}
		delete(w.mayRerun, a.Unit)
		w.queue = append(w.queue, evLedgerRecorded{Unit: a.Unit, Attempt: a.Attempt})
	case actReplaceWorker:
		w.queue = append(w.queue, evWorkerUp{Worker: a.Worker})
	case actPhase:
	case actCommit:
		out := map[int][]span{}
		for _, p := range a.Parts {
			if p.File.Name == "" {
				continue
			}
			c, ok := w.files[p.File.Name]
			if !ok {
				w.queue = append(w.queue, evCommitFileBad{Job: a.Job, Producer: p.Producer, File: p.File.Name})
				return
			}
			out[p.Subtask] = c
		}
		if w.durable.commits[a.Job] != nil {
			w.fatalf("job %d committed twice", a.Job)
		}
		c := a.Commit
		w.durable.commits[a.Job] = &c
		w.committed[a.Job] = out
		w.queue = append(w.queue, evCommitted{Job: a.Job})
	case actCollect:
		// As the executor does: map files of the previous job (this one
		// for map-only), state of the one before, this job's outputs.
		for name := range w.files {
			var kind byte
			var j int
			fmt.Sscanf(name, "%c/%d/", &kind, &j)
			if (kind == 'm' && ((w.cfg.mapOnly && j == a.Job) || (!w.cfg.mapOnly && j == a.Job-1))) ||
				(kind == 's' && j == a.Job-2) || (kind == 'o' && j == a.Job) {
				w.remove(name)
			}
		}
	case actDone:
	case actFail:
		w.fatalf("machine failed: %v", a.Err)
	default:
		w.fatalf("unknown action %T", a)
	}
}

// remove deletes a file and lets its producer re-run.
func (w *world) remove(name string) {
	delete(w.files, name)
	for u, e := range w.durable.maps {
		for _, f := range e.Files {
			if f.Name == name {
				w.mayRerun[u] = true
			}
		}
	}
	for u, e := range w.durable.reduces {
		if e.Out.Name == name || (e.State != nil && e.State.Name == name) {
			w.mayRerun[u] = true
		}
	}
}

func (w *world) put(name string, c []span) FileRef {
	if len(c) == 0 {
		return FileRef{}
	}
	w.files[name] = c
	return FileRef{Name: name, Rows: int64(len(c))}
}

// complete finishes flight f as a worker would.
func (w *world) complete(f *flight) {
	a := f.act
	if t := a.Map; t != nil {
		start, end, eof := t.Start, t.End, false
		if end < 0 || end > w.size[t.Split] {
			end, eof = w.size[t.Split], true
		}
		eof = eof || t.KnownEOF
		e := &MapEntry{Start: start, End: end, Records: end - start, MaxTS: operator.NoWatermark, EOF: eof}
		if end > start {
			e.MaxTS = end
		}
		n := w.cfg.parallelism
		if w.cfg.mapOnly {
			n = 1
		}
		for r := range n {
			var c []span
			if end > start {
				c = []span{{t.Split, start, end}}
			}
			e.Files = append(e.Files, w.put(fmt.Sprintf("m/%d/%d/%d/%d", t.Job, t.Split, a.Attempt, r), c))
		}
		w.queue = append(w.queue, evAttemptSucceeded{Unit: a.Unit, Attempt: a.Attempt, Map: e})
		return
	}
	t := a.Reduce
	var state []span
	if t.StateIn != nil && t.StateIn.Name != "" {
		c, ok := w.files[t.StateIn.Name]
		if !ok {
			w.queue = append(w.queue, evFileBad{Unit: a.Unit, Attempt: a.Attempt, Producer: t.StateProducer, File: t.StateIn.Name})
			return
		}
		state = slices.Clone(c)
	}
	// Exactly-once state: the carried state covers exactly the ranges of
	// the jobs before this one.
	plan := w.durable.plans[t.Job]
	w.checkCovers(state, plan.Starts, fmt.Sprintf("state carried into %s", a.Unit))
	var out []span
	for _, in := range t.Inputs {
		if in.File.Name == "" {
			continue
		}
		c, ok := w.files[in.File.Name]
		if !ok {
			w.queue = append(w.queue, evFileBad{Unit: a.Unit, Attempt: a.Attempt, Producer: in.Producer, File: in.File.Name})
			return
		}
		out = append(out, c...)
	}
	state = append(state, out...)
	e := &ReduceEntry{RowsIn: int64(len(out))}
	st := w.put(fmt.Sprintf("s/%d/%d/%d", t.Job, t.Partition, a.Attempt), state)
	e.State = &st
	if !t.StateOnly {
		e.Out = w.put(fmt.Sprintf("o/%d/%d/%d", t.Job, t.Partition, a.Attempt), out)
	}
	w.queue = append(w.queue, evAttemptSucceeded{Unit: a.Unit, Attempt: a.Attempt, Reduce: e})
}

// checkCovers asserts spans cover [0, upTo[s]) of every split exactly once.
func (w *world) checkCovers(spans []span, upTo []int64, what string) {
	w.t.Helper()
	per := map[int][]span{}
	for _, s := range spans {
		per[s.split] = append(per[s.split], s)
	}
	for s, end := range upTo {
		ss := per[s]
		slices.SortFunc(ss, func(a, b span) int { return int(a.from - b.from) })
		at := int64(0)
		for _, x := range ss {
			if x.from != at {
				w.fatalf("%s: split %d has %v, a gap or an overlap at %d", what, s, ss, at)
			}
			at = x.to
		}
		if at != end {
			w.fatalf("%s: split %d covered to %d, want %d (%v)", what, s, at, end, ss)
		}
	}
}

// run drives the world to the end with the given fault rates.
func (w *world) run(pCrashUnit, pLose, pRestart float64, maxLoss int) {
	for w.stats.steps = 0; w.stats.steps < 100_000; w.stats.steps++ {
		w.drain(pRestart)
		if w.m.finished {
			return
		}
		if len(w.flights) == 0 {
			if len(w.queue) == 0 && len(w.acts) == 0 {
				w.fatalf("nothing in flight and nothing to do: the machine is stuck")
			}
			continue
		}
		r := w.rng.Float64()
		switch {
		case r < pCrashUnit:
			i := w.rng.IntN(len(w.flights))
			f := w.flights[i]
			w.flights = slices.Delete(w.flights, i, i+1)
			w.interrupted[f.act.Unit]++
			w.stats.crashes++
			w.feed(evAttemptCrashed{Unit: f.act.Unit, Attempt: f.act.Attempt, Worker: f.act.Worker})
		case r < pCrashUnit+pLose && w.stats.losses < maxLoss:
			// Lose a file some ledger entry names.
			var names []string
			for name := range w.files {
				names = append(names, name)
			}
			slices.Sort(names)
			if len(names) > 0 {
				w.remove(names[w.rng.IntN(len(names))])
				w.stats.losses++
			}
		default:
			i := w.rng.IntN(len(w.flights))
			f := w.flights[i]
			w.flights = slices.Delete(w.flights, i, i+1)
			before := len(w.queue)
			w.complete(f)
			if len(w.queue) > before {
				if _, bad := w.queue[len(w.queue)-1].(evFileBad); bad {
					w.interrupted[f.act.Unit]++
				}
			}
		}
	}
	w.fatalf("the run did not finish")
}

// checkEnd: every split was committed exactly once, in job order, by
// every reduce partition.
func (w *world) checkEnd() {
	w.t.Helper()
	n := len(w.durable.commits)
	parts := w.cfg.parallelism
	if w.cfg.mapOnly {
		parts = w.cfg.splits
	}
	for sub := range parts {
		var all []span
		for j := range n {
			all = append(all, w.committed[j][sub]...)
		}
		if w.cfg.mapOnly {
			// A map-only subtask is one split.
			up := make([]int64, w.cfg.splits)
			up[sub] = w.size[sub]
			w.checkCovers(all, up, fmt.Sprintf("output of subtask %d", sub))
		} else {
			w.checkCovers(all, w.size, fmt.Sprintf("output of partition %d", sub))
		}
	}
	// Every attempt beyond a unit's first is explained by an interruption
	// or a lost file.
	for u, s := range w.starts {
		if s > 1+w.interrupted[u]+w.lossReruns[u] {
			w.fatalf("unit %s started %d times, interrupted %d times, re-run for lost files %d times", u, s, w.interrupted[u], w.lossReruns[u])
		}
	}
}

func baseConfig(splits, p int, mode string, perSplit int64) machineConfig {
	ports := make([]int, splits)
	return machineConfig{splits: splits, ports: ports, parallelism: p, workers: p, stateful: true,
		mode: mode, perSplit: perSplit}
}

func TestMachineRandomWorlds(t *testing.T) {
	var restarts, crashes, losses, lossReruns, jobs int
	defer func() {
		t.Logf("%d coordinator restarts, %d unit crashes, %d lost files (%d re-runs for them), %d finite jobs", restarts, crashes, losses, lossReruns, jobs)
		if restarts == 0 || crashes == 0 || losses == 0 || lossReruns == 0 {
			t.Errorf("the random worlds did not exercise every fault")
		}
	}()
	for seed := uint64(1); seed <= 600; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		splits, p := 1+rng.IntN(4), 1+rng.IntN(3)
		mode := []string{modeWhole, modeRecords, modeRecords}[rng.IntN(3)]
		cfg := baseConfig(splits, p, mode, int64(1+rng.IntN(40)))
		cfg.mapOnly = rng.IntN(5) == 0
		if cfg.mapOnly {
			cfg.stateful = false
		}
		size := make([]int64, splits)
		for s := range size {
			size[s] = int64(rng.IntN(100))
		}
		w := newWorld(t, seed, cfg, size)
		pc, pl, pr := []float64{0, 0.05, 0.2}[rng.IntN(3)], []float64{0, 0.02, 0.1}[rng.IntN(3)], []float64{0, 0.01, 0.05}[rng.IntN(3)]
		w.run(pc, pl, pr, 6)
		if t.Failed() {
			t.Fatalf("seed %d (splits %d, parallelism %d, mode %s, sizes %v)", seed, splits, p, mode, size)
		}
		w.checkEnd()
		restarts += w.stats.restarts
		crashes += w.stats.crashes
		losses += w.stats.losses
		jobs += len(w.durable.commits)
		for _, n := range w.lossReruns {
			lossReruns += n
		}
	}
}

// TestMachineCrashRerunsOnOtherWorker: the unit of a dead worker goes to
// the other worker once it is free, not to the dead one's replacement.
func TestMachineCrashRerunsOnOtherWorker(t *testing.T) {
	cfg := baseConfig(2, 2, modeWhole, 0)
	m, err := restore(cfg, 0, emptyDurable())
	if err != nil {
		t.Fatal(err)
	}
	acts := m.Step(evStarted{})
	plan := acts[0].(actPersistPlan)
	runs := runsOf(m.Step(evPlanPersisted{Job: plan.Plan.Job}))
	if len(runs) != 2 {
		t.Fatalf("want both map units dispatched, got %v", runs)
	}
	dead := runs[0]
	acts = m.Step(evAttemptCrashed{Unit: dead.Unit, Attempt: dead.Attempt, Worker: dead.Worker})
	if len(runsOf(acts)) != 0 {
		t.Fatalf("the unit was re-dispatched at once to %v; the other worker is busy", runsOf(acts))
	}
	if r := runsOf(m.Step(evWorkerUp{Worker: dead.Worker})); len(r) != 0 {
		t.Fatalf("the unit went to the dead worker's replacement: %v", r)
	}
	other := runs[1]
	r := runsOf(m.Step(evAttemptSucceeded{Unit: other.Unit, Attempt: other.Attempt, Map: &MapEntry{End: 5, EOF: true, Files: make([]FileRef, 2)}}))
	if len(r) != 1 || r[0].Unit != dead.Unit || r[0].Worker != other.Worker || r[0].Attempt == dead.Attempt {
		t.Fatalf("re-run %v, want %s on worker %d with a new attempt", r, dead.Unit, other.Worker)
	}
}

func runsOf(acts []action) []actRun {
	var out []actRun
	for _, a := range acts {
		if r, ok := a.(actRun); ok {
			out = append(out, r)
		}
	}
	return out
}

// TestMachineRestoreKeepsRecordedUnits: a machine restored from a ledger
// holding some units dispatches only the others.
func TestMachineRestoreKeepsRecordedUnits(t *testing.T) {
	cfg := baseConfig(3, 2, modeWhole, 0)
	d := emptyDurable()
	d.plans[0] = JobPlan{Job: 0, Starts: make([]int64, 3), EOF: make([]bool, 3), Ends: []int64{-1, -1, -1},
		Tracker: trackerState(3)}
	d.maps[UnitID{0, kindMap, 1}] = &MapEntry{End: 10, EOF: true, MaxTS: 9, Records: 10, Files: []FileRef{{Name: "a", Rows: 1}, {}}}
	m, err := restore(cfg, 1, d)
	if err != nil {
		t.Fatal(err)
	}
	var got []UnitID
	for _, r := range runsOf(m.Step(evStarted{})) {
		got = append(got, r.Unit)
		if r.Attempt < attemptStride {
			t.Fatalf("attempt %d of incarnation 1 could collide with incarnation 0", r.Attempt)
		}
	}
	want := []UnitID{{0, kindMap, 0}, {0, kindMap, 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
}

// TestMachineLostFileRerunsItsProducer: a reduce unit that finds a map file
// missing sends exactly that map unit back to work.
func TestMachineLostFileRerunsItsProducer(t *testing.T) {
	cfg := baseConfig(2, 1, modeWhole, 0)
	m, _ := restore(cfg, 0, emptyDurable())
	m.Step(evStarted{})
	var red actRun
	for pending := slices.Clone(m.Step(evPlanPersisted{Job: 0})); len(pending) > 0 && red.Reduce == nil; {
		a := pending[0]
		pending = pending[1:]
		switch a := a.(type) {
		case actRun:
			if a.Reduce != nil {
				red = a
				break
			}
			pending = append(pending, m.Step(evAttemptSucceeded{Unit: a.Unit, Attempt: a.Attempt, Map: &MapEntry{End: 3, Records: 3, MaxTS: 2, EOF: true,
				Files: []FileRef{{Name: fmt.Sprintf("f%d", a.Unit.Index), Rows: 3}}}})...)
		case actRecord:
			pending = append(pending, m.Step(evLedgerRecorded{Unit: a.Unit, Attempt: a.Attempt})...)
		}
	}
	r := runsOf(m.Step(evFileBad{Unit: red.Unit, Attempt: red.Attempt, Producer: UnitID{0, kindMap, 1}, File: "f1"}))
	if len(r) != 1 || r[0].Unit != (UnitID{0, kindMap, 1}) || r[0].Map.Start != 0 || r[0].Map.End != 3 || !r[0].Map.KnownEOF {
		t.Fatalf("after the loss: %v, want map unit 1 re-reading exactly [0,3)", r)
	}
}

func trackerState(n int) eventtime.State { return eventtime.NewTracker(n, 0).State() }

// TestMachineRestoreNamesALedgerGap: a committed job whose ledger lacks
// units (durable storage lost their entries) is refused with exactly those
// units, so the coordinator can name the missing objects.
func TestMachineRestoreNamesALedgerGap(t *testing.T) {
	cfg := baseConfig(3, 2, modeWhole, 0)
	d := emptyDurable()
	d.plans[0] = JobPlan{Job: 0, Starts: make([]int64, 3), EOF: make([]bool, 3), Ends: []int64{-1, -1, -1},
		Tracker: trackerState(3)}
	d.maps[UnitID{0, kindMap, 1}] = &MapEntry{End: 10, EOF: true, MaxTS: 9, Records: 10, Files: []FileRef{{Name: "a", Rows: 1}, {}}}
	d.commits[0] = &JobCommit{Job: 0}
	_, err := restore(cfg, 1, d)
	var gap HistoryGapError
	if !errors.As(err, &gap) {
		t.Fatalf("restore over a ledger gap: %v, want a HistoryGapError", err)
	}
	want := []UnitID{{0, kindMap, 0}, {0, kindMap, 2}, {0, kindReduce, 0}, {0, kindReduce, 1}}
	if gap.Job != 0 || !slices.Equal(gap.Missing, want) {
		t.Fatalf("gap %+v, want job 0 missing %v", gap, want)
	}
	n := names{root: "r/"}
	if got := n.ledger(gap.Missing[0]); got != "r/j000000/ledger/m00000.json" {
		t.Fatalf("ledger name %q", got)
	}
}

// TestMachineRestoreNamesAMissingCommit: a job without its commit marker
// followed by a planned job is a gap in the history, not a job to redo.
func TestMachineRestoreNamesAMissingCommit(t *testing.T) {
	cfg := baseConfig(3, 2, modeWhole, 0)
	d := emptyDurable()
	for j := range 2 {
		d.plans[j] = JobPlan{Job: j, Starts: make([]int64, 3), EOF: make([]bool, 3), Ends: []int64{-1, -1, -1},
			Tracker: trackerState(3)}
	}
	_, err := restore(cfg, 1, d)
	var gap HistoryGapError
	if !errors.As(err, &gap) || gap.Job != 0 || !gap.NoCommit {
		t.Fatalf("restore over a missing commit marker: %v, want HistoryGapError{Job: 0, NoCommit: true}", err)
	}
}
