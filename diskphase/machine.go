package diskphase

import (
	"fmt"
	"sort"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
)

// unitKind tells map units from reduce units.
type unitKind uint8

const (
	kindMap unitKind = iota
	kindReduce
)

// UnitID names one unit of work: map unit Index (a split) or reduce unit
// Index (a partition) of finite job Job.
type UnitID struct {
	Job   int
	Kind  unitKind
	Index int
}

func (u UnitID) String() string {
	if u.Kind == kindMap {
		return fmt.Sprintf("j%d/map-%d", u.Job, u.Index)
	}
	return fmt.Sprintf("j%d/reduce-%d", u.Job, u.Index)
}

type unitStatus uint8

const (
	stPending   unitStatus = iota // waiting for its inputs or a worker
	stRunning                     // an attempt is in flight on a worker
	stFinishing                   // the attempt succeeded; its ledger entry is being written
	stDone                        // the ledger entry is durable
)

// attemptStride separates the attempt numbers of coordinator incarnations:
// attempt = incarnation*attemptStride + sequence. Attempt numbers name
// files and sink writers, so they must never repeat across restarts.
const attemptStride = 1_000_000

// defaultMaxLossReruns bounds how often one unit is re-run because a file
// it produced went missing: beyond it something other than bad luck is
// wrong and the run fails instead of looping.
const defaultMaxLossReruns = 8

type unitState struct {
	id      UnitID
	status  unitStatus
	attempt int // current or last attempt
	worker  int // worker of the current attempt
	avoid   int // worker the last attempt died on, -1 for none
	losses  int // re-runs caused by lost files
	// rebuild marks a reduce unit of an already committed job re-run only
	// to regenerate its state table.
	rebuild bool

	mapEnt *MapEntry
	redEnt *ReduceEntry
	// pending entries, between success and durability
	pendMap *MapEntry
	pendRed *ReduceEntry
}

type jobState struct {
	id      int
	plan    JobPlan
	planned bool // the plan is durable
	order   []int
	maps    map[int]*unitState
	reduces []*unitState

	wmKnown      bool
	prevWM, wm   int64
	trackerAfter eventtime.State

	committing bool
	pendCommit *JobCommit
	committed  bool
	commit     *JobCommit
}

// machineConfig is what the machine knows about the run.
type machineConfig struct {
	splits      int
	ports       []int // per split: the reduce input port its rows feed
	parallelism int   // reduce partitions
	workers     int
	mapOnly     bool
	stateful    bool   // the reduce operator carries state between jobs
	mode        string // whole | records | interval
	perSplit    int64  // records mode
	maxDisorder int64
	maxLoss     int
}

func (c machineConfig) validate() error {
	switch {
	case c.splits < 1:
		return fmt.Errorf("no input splits")
	case len(c.ports) != c.splits:
		return fmt.Errorf("%d ports for %d splits", len(c.ports), c.splits)
	case c.parallelism < 1 || c.workers < 1:
		return fmt.Errorf("parallelism %d, workers %d", c.parallelism, c.workers)
	case c.mode != modeWhole && c.mode != modeRecords && c.mode != modeInterval:
		return fmt.Errorf("unknown range mode %q", c.mode)
	case c.mode == modeRecords && c.perSplit < 1:
		return fmt.Errorf("records mode needs a positive range")
	}
	return nil
}

// Range modes of a run.
const (
	modeWhole    = "whole"
	modeRecords  = "records"
	modeInterval = "interval"
)

type workerState struct {
	alive, busy bool
	unit        UnitID
}

// machine is the coordinator's plan and ledger logic, a pure state
// machine: see the package doc for its states and how the coordinator
// drives it.
type machine struct {
	cfg     machineConfig
	inc     int
	seq     int
	jobs    map[int]*jobState
	cur     int
	workers []workerState
	// out is the buffer Step returns, reused by the next Step.
	out      []action
	started  bool
	finished bool
	failed   bool
}

// durableState is what a restarted coordinator finds in durable storage.
type durableState struct {
	plans   map[int]JobPlan
	maps    map[UnitID]*MapEntry
	reduces map[UnitID]*ReduceEntry
	commits map[int]*JobCommit
}

func emptyDurable() *durableState {
	return &durableState{plans: map[int]JobPlan{}, maps: map[UnitID]*MapEntry{},
		reduces: map[UnitID]*ReduceEntry{}, commits: map[int]*JobCommit{}}
}

// restore builds the machine of coordinator incarnation inc from durable
// state: a pure function. Units with a ledger entry are done and are never
// run again (unless a file they produced is later found lost); units
// without one are pending, whatever was running when the previous
// coordinator died. The machine says what to do next when it is given
// evStarted, its first input.
func restore(cfg machineConfig, inc int, d *durableState) (*machine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.maxLoss == 0 {
		cfg.maxLoss = defaultMaxLossReruns
	}
	m := &machine{cfg: cfg, inc: inc, jobs: map[int]*jobState{}, cur: -1, workers: make([]workerState, cfg.workers)}
	for w := range m.workers {
		m.workers[w].alive = true
	}
	ids := make([]int, 0, len(d.plans))
	for j := range d.plans {
		ids = append(ids, j)
	}
	sort.Ints(ids)
	for i, j := range ids {
		if j != i {
			return nil, HistoryGapError{Job: i, NoPlan: true}
		}
		p := d.plans[j]
		if err := m.checkPlan(p); err != nil {
			return nil, err
		}
		js := m.addJob(p)
		js.planned = true
		for _, s := range js.order {
			if e := d.maps[UnitID{j, kindMap, s}]; e != nil {
				u := js.maps[s]
				u.status, u.mapEnt, u.attempt = stDone, e, e.Attempt
			}
		}
		for r, u := range js.reduces {
			if e := d.reduces[UnitID{j, kindReduce, r}]; e != nil {
				u.status, u.redEnt, u.attempt = stDone, e, e.Attempt
			}
		}
		if m.allMapsDone(js) {
			if err := m.computeWatermark(js); err != nil {
				return nil, err
			}
		}
		if c := d.commits[j]; c != nil {
			if !m.readyToCommit(js) {
				return nil, HistoryGapError{Job: j, Missing: m.unfinished(js)}
			}
			js.committed, js.commit = true, c
		} else if j != ids[len(ids)-1] {
			return nil, HistoryGapError{Job: j, NoCommit: true}
		}
		m.cur = j
	}
	return m, nil
}

func (m *machine) emit(a action) { m.out = append(m.out, a) }

func (m *machine) fail(err error) {
	if !m.failed {
		m.failed = true
		m.emit(actFail{Err: err})
	}
}

func (m *machine) unit(id UnitID) *unitState {
	js := m.jobs[id.Job]
	if js == nil {
		return nil
	}
	if id.Kind == kindMap {
		return js.maps[id.Index]
	}
	if id.Index < 0 || id.Index >= len(js.reduces) {
		return nil
	}
	return js.reduces[id.Index]
}

// isDone reports whether a unit's ledger entry is durable.
func (m *machine) isDone(id UnitID) bool {
	u := m.unit(id)
	return u != nil && u.status == stDone
}

// Step applies one event and returns the actions to carry out, in order.
// The slice is the machine's own buffer: it is valid until the next Step,
// and a driver that keeps actions longer copies them. Once the machine
// has failed or finished it answers nothing more.
func (m *machine) Step(ev event) []action {
	clear(m.out)
	m.out = m.out[:0]
	m.step(ev)
	if len(m.out) == 0 {
		return nil
	}
	return m.out
}

func (m *machine) step(ev event) {
	if m.failed || m.finished {
		return
	}
	if _, start := ev.(evStarted); start != !m.started {
		m.fail(fmt.Errorf("diskphase machine: event %s %s", ev, m.startedState()))
		return
	}
	switch e := ev.(type) {
	case evStarted:
		m.started = true
	case evPlanPersisted:
		if js := m.jobs[e.Job]; js != nil {
			js.planned = true
		}
	case evAttemptSucceeded:
		u := m.unit(e.Unit)
		if u == nil || u.status != stRunning || u.attempt != e.Attempt {
			break // a stale report of an abandoned attempt
		}
		m.free(u.worker)
		u.status = stFinishing
		if e.Unit.Kind == kindMap {
			if e.Map == nil {
				m.fail(fmt.Errorf("unit %s reported success without a map entry", e.Unit))
				return
			}
			ent := *e.Map
			ent.Attempt = e.Attempt
			u.pendMap = &ent
			m.emit(actRecord{Unit: u.id, Attempt: e.Attempt, Map: &ent})
		} else {
			if e.Reduce == nil {
				m.fail(fmt.Errorf("unit %s reported success without a reduce entry", e.Unit))
				return
			}
			ent := *e.Reduce
			ent.Attempt = e.Attempt
			if u.rebuild {
				// The output was published with the job; keep naming the
				// attempt that wrote it.
				if u.redEnt != nil {
					ent.Out = u.redEnt.Out
				}
				ent.Rebuilt = true
			}
			u.pendRed = &ent
			m.emit(actRecord{Unit: u.id, Attempt: e.Attempt, Reduce: &ent})
		}
	case evLedgerRecorded:
		u := m.unit(e.Unit)
		if u == nil || u.status != stFinishing || u.attempt != e.Attempt {
			break
		}
		u.status = stDone
		if u.pendMap != nil {
			u.mapEnt, u.pendMap = u.pendMap, nil
		}
		if u.pendRed != nil {
			u.redEnt, u.pendRed = u.pendRed, nil
		}
		u.rebuild = false
	case evAttemptCrashed:
		if u := m.unit(e.Unit); u != nil && u.status == stRunning && u.attempt == e.Attempt {
			u.status = stPending
			u.avoid = e.Worker
		}
		m.workerDied(e.Worker)
	case evWorkerLost:
		m.workerDied(e.Worker)
	case evWorkerUp:
		if e.Worker >= 0 && e.Worker < len(m.workers) && !m.workers[e.Worker].alive {
			m.workers[e.Worker] = workerState{alive: true}
		}
	case evFileBad:
		u := m.unit(e.Unit)
		if u == nil || u.status != stRunning || u.attempt != e.Attempt {
			break
		}
		m.free(u.worker)
		u.status = stPending
		u.avoid = -1
		m.lose(e.Producer, e.File)
	case evCommitFileBad:
		js := m.jobs[e.Job]
		if js == nil || !js.committing {
			break
		}
		js.committing, js.pendCommit = false, nil
		m.lose(e.Producer, e.File)
	case evCommitted:
		js := m.jobs[e.Job]
		if js == nil || !js.committing {
			break
		}
		js.committing, js.committed = false, true
		js.commit, js.pendCommit = js.pendCommit, nil
		m.emit(actCollect{Job: e.Job})
	case evAttemptFailed:
		m.fail(fmt.Errorf("unit %s attempt %d: %w", e.Unit, e.Attempt, e.Err))
		return
	default:
		m.fail(fmt.Errorf("diskphase machine: unknown event %s", ev))
		return
	}
	m.advance()
	m.schedule()
}

func (m *machine) startedState() string {
	if m.started {
		return "after the machine started"
	}
	return "before the machine started"
}

func (m *machine) free(w int) {
	if w >= 0 && w < len(m.workers) {
		m.workers[w].busy = false
	}
}

// workerDied marks w dead and asks for a replacement. Its unit, if any,
// must already have been returned to pending by the caller.
func (m *machine) workerDied(w int) {
	if w < 0 || w >= len(m.workers) || !m.workers[w].alive {
		return
	}
	if ws := m.workers[w]; ws.busy {
		if u := m.unit(ws.unit); u != nil && u.status == stRunning && u.worker == w {
			u.status = stPending
			u.avoid = w
		}
	}
	m.workers[w] = workerState{}
	m.emit(actReplaceWorker{Worker: w})
}

// lose handles a file reported missing or corrupt: the unit that produced
// it goes back to pending, and only that unit.
func (m *machine) lose(producer UnitID, file string) {
	p := m.unit(producer)
	if p == nil {
		m.fail(fmt.Errorf("file %s names an unknown producer %s", file, producer))
		return
	}
	if p.status != stDone || !entryNames(p, file) {
		return // already being re-run, or the report is about an older file
	}
	p.losses++
	if p.losses > m.cfg.maxLoss {
		m.fail(fmt.Errorf("unit %s: its files were lost %d times (last %s); giving up", producer, p.losses, file))
		return
	}
	p.status = stPending
	p.avoid = -1
	if producer.Kind == kindReduce && m.jobs[producer.Job].committed {
		p.rebuild = true
	}
}

func entryNames(u *unitState, file string) bool {
	if file == "" {
		return false
	}
	if e := u.mapEnt; e != nil {
		for _, f := range e.Files {
			if f.names(file) {
				return true
			}
		}
	}
	if e := u.redEnt; e != nil {
		if e.Out.names(file) || (e.State != nil && e.State.names(file)) {
			return true
		}
	}
	return false
}
