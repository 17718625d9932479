package diskphase

import (
	"fmt"
	"sort"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

// The coordinator's plan and ledger logic is a pure state machine, in the
// style of etcd's raft package: the machine has explicit state, takes
// events (a unit finished, a unit's worker died, a file was found missing
// or corrupt, a record became durable) and answers with actions (persist
// this plan, run unit U on worker W, record this ledger entry, commit job
// J). It never does I/O, starts goroutines or reads a clock; the loop in
// coordinator.go carries out its actions and feeds the results back.
//
// Durability is explicit: a unit is done only once the loop reports its
// ledger entry durable (evLedgerRecorded), a plan is usable only once it is
// durable (evPlanPersisted). Restarting a coordinator is restore(): a pure
// function from what durable storage holds to the machine's state.

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

// Events.
type event interface{ isEvent() }

type (
	evPlanPersisted    struct{ Job int }
	evAttemptSucceeded struct {
		Unit    UnitID
		Attempt int
		Map     *MapEntry
		Reduce  *ReduceEntry
	}
	// evAttemptCrashed: the worker running the attempt died with it.
	evAttemptCrashed struct {
		Unit            UnitID
		Attempt, Worker int
	}
	// evWorkerLost: an idle worker died.
	evWorkerLost struct{ Worker int }
	evWorkerUp   struct{ Worker int }
	// evFileBad: the attempt stopped because an input file is missing or
	// fails its checksum; its worker is fine.
	evFileBad struct {
		Unit     UnitID
		Attempt  int
		Producer UnitID
		File     string
	}
	evLedgerRecorded struct {
		Unit    UnitID
		Attempt int
	}
	evCommitted     struct{ Job int }
	evCommitFileBad struct {
		Job      int
		Producer UnitID
		File     string
	}
	// evAttemptFailed: the attempt failed for a reason re-running cannot
	// cure (a bug, bad input); the run fails.
	evAttemptFailed struct {
		Unit    UnitID
		Attempt int
		Err     error
	}
)

func (evPlanPersisted) isEvent()    {}
func (evAttemptSucceeded) isEvent() {}
func (evAttemptCrashed) isEvent()   {}
func (evWorkerLost) isEvent()       {}
func (evWorkerUp) isEvent()         {}
func (evFileBad) isEvent()          {}
func (evLedgerRecorded) isEvent()   {}
func (evCommitted) isEvent()        {}
func (evCommitFileBad) isEvent()    {}
func (evAttemptFailed) isEvent()    {}

// Actions.
type action interface{ isAction() }

type (
	actPersistPlan struct{ Plan JobPlan }
	actRun         struct {
		Unit            UnitID
		Attempt, Worker int
		Map             *mapTask
		Reduce          *reduceTask
	}
	actRecord struct {
		Unit    UnitID
		Attempt int
		Map     *MapEntry
		Reduce  *ReduceEntry
	}
	actReplaceWorker struct{ Worker int }
	// actPhase: every map unit of Job is done; the reduce phase starts.
	actPhase  struct{ Job int }
	actCommit struct {
		Job     int
		Attempt int // the sink writers' attempt number
		Parts   []commitPart
		Commit  JobCommit
	}
	// actCollect: Job committed; its and older jobs' files nobody can
	// need any more may go.
	actCollect struct{ Job int }
	actDone    struct{}
	actFail    struct{ Err error }
)

func (actPersistPlan) isAction()   {}
func (actRun) isAction()           {}
func (actRecord) isAction()        {}
func (actReplaceWorker) isAction() {}
func (actPhase) isAction()         {}
func (actCommit) isAction()        {}
func (actCollect) isAction()       {}
func (actDone) isAction()          {}
func (actFail) isAction()          {}

// commitPart is one sink subtask's rows in a job commit.
type commitPart struct {
	Subtask  int
	File     FileRef
	Producer UnitID
}

// mapTask is everything a map unit needs.
type mapTask struct {
	Job, Split int
	Start      int64
	End        int64 // exclusive; -1 = open (to the end, or for the interval)
	// KnownEOF: an earlier attempt already found the split's end inside
	// this range (a re-run of a recorded unit reads exactly its range).
	KnownEOF bool
}

// reduceTask is everything a reduce unit needs.
type reduceTask struct {
	Job, Partition int
	Inputs         []reduceInput
	// StateIn is the state table after the previous job (nil for job 0 or
	// stateless operators); StateProducer made it.
	StateIn       *FileRef
	StateProducer UnitID
	PrevWM, WM    int64
	// StateOnly re-runs a unit of a committed job to rebuild its state
	// table; its output was published already and is not written again.
	StateOnly bool
}

type reduceInput struct {
	Split, Port int
	File        FileRef
	Producer    UnitID
}

type workerState struct {
	alive, busy bool
	unit        UnitID
}

type machine struct {
	cfg      machineConfig
	inc      int
	seq      int
	jobs     map[int]*jobState
	cur      int
	workers  []workerState
	out      []action
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
// coordinator died. The first call of take() then yields what to do next.
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
	m.advance()
	m.schedule()
	return m, nil
}

func (m *machine) checkPlan(p JobPlan) error {
	n := m.cfg.splits
	if len(p.Starts) != n || len(p.EOF) != n || len(p.Ends) != n {
		return fmt.Errorf("plan of job %d describes %d/%d/%d splits, the run has %d", p.Job, len(p.Starts), len(p.EOF), len(p.Ends), n)
	}
	if len(p.Tracker.MaxTS) != n || len(p.Tracker.Done) != n {
		return fmt.Errorf("plan of job %d carries an event-time tracker of %d partitions, the run has %d", p.Job, len(p.Tracker.MaxTS), n)
	}
	return nil
}

func (m *machine) addJob(p JobPlan) *jobState {
	js := &jobState{id: p.Job, plan: p, order: p.active(), maps: map[int]*unitState{}}
	for _, s := range js.order {
		js.maps[s] = &unitState{id: UnitID{p.Job, kindMap, s}, avoid: -1}
	}
	if !m.cfg.mapOnly {
		js.reduces = make([]*unitState, m.cfg.parallelism)
		for r := range js.reduces {
			js.reduces[r] = &unitState{id: UnitID{p.Job, kindReduce, r}, avoid: -1}
		}
	}
	m.jobs[p.Job] = js
	return js
}

// take returns the actions produced since the last call.
func (m *machine) take() []action {
	out := m.out
	m.out = nil
	return out
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

// step applies one event.
func (m *machine) step(ev event) {
	if m.failed || m.finished {
		return
	}
	switch e := ev.(type) {
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
		m.fail(fmt.Errorf("unknown event %T", ev))
		return
	}
	m.advance()
	m.schedule()
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
			if f.Name == file {
				return true
			}
		}
	}
	if e := u.redEnt; e != nil {
		if e.Out.Name == file || (e.State != nil && e.State.Name == file) {
			return true
		}
	}
	return false
}

func (m *machine) allMapsDone(js *jobState) bool {
	for _, s := range js.order {
		if js.maps[s].status != stDone {
			return false
		}
	}
	return true
}

// HistoryGapError is durable storage that lost records the protocol wrote
// before later ones it still holds: a committed job's ledger entries (a
// commit is only written once every unit's entry is durable), the commit
// marker of a job followed by a planned one, or the plan of a job followed
// by later plans. The run's history cannot be trusted then; the
// coordinator names the missing objects.
type HistoryGapError struct {
	Job      int
	Missing  []UnitID // ledger entries of a committed job
	NoCommit bool     // the job's commit marker, though job Job+1 was planned
	NoPlan   bool     // the job's plan, though later jobs were planned
}

func (e HistoryGapError) Error() string {
	switch {
	case e.NoPlan:
		return fmt.Sprintf("the plan of job %d is missing, yet later jobs were planned", e.Job)
	case e.NoCommit:
		return fmt.Sprintf("job %d has no commit marker, yet job %d was planned", e.Job, e.Job+1)
	}
	return fmt.Sprintf("job %d has a commit marker but the ledger lacks %d of its units (%v)", e.Job, len(e.Missing), e.Missing)
}

// unfinished lists the units of js without a ledger entry, maps first.
func (m *machine) unfinished(js *jobState) []UnitID {
	var out []UnitID
	for _, s := range js.order {
		if js.maps[s].status != stDone {
			out = append(out, UnitID{js.id, kindMap, s})
		}
	}
	for r, u := range js.reduces {
		if u.status != stDone {
			out = append(out, UnitID{js.id, kindReduce, r})
		}
	}
	return out
}

func (m *machine) readyToCommit(js *jobState) bool {
	if !m.allMapsDone(js) {
		return false
	}
	for _, u := range js.reduces {
		if u.status != stDone {
			return false
		}
	}
	return true
}

// rebuildsOutstanding reports whether a unit of an older job is being
// re-run; the current job commits only after they settle, so garbage
// collection never races a re-run.
func (m *machine) rebuildsOutstanding() bool {
	for j := 0; j < m.cur; j++ {
		js := m.jobs[j]
		for _, s := range js.order {
			if js.maps[s].status != stDone {
				return true
			}
		}
		for _, u := range js.reduces {
			if u.status != stDone {
				return true
			}
		}
	}
	return false
}

// computeWatermark folds the map units' event-time observations into the
// tracker: the reduce units of the job advance their operators to it.
func (m *machine) computeWatermark(js *jobState) error {
	tr := eventtime.NewTracker(m.cfg.splits, m.cfg.maxDisorder)
	if !tr.Restore(js.plan.Tracker) {
		return fmt.Errorf("job %d: event-time tracker does not fit %d splits", js.id, m.cfg.splits)
	}
	js.prevWM = tr.Watermark()
	for _, s := range js.order {
		e := js.maps[s].mapEnt
		if e.Records > 0 && e.MaxTS != operator.NoWatermark {
			tr.ObserveTS(s, e.MaxTS)
		}
		if e.EOF {
			tr.Finish(s)
		}
	}
	js.wm, js.trackerAfter, js.wmKnown = tr.Watermark(), tr.State(), true
	return nil
}

// advance moves the current finite job through its life: plan, map phase,
// reduce phase, commit, next job.
func (m *machine) advance() {
	if m.failed || m.finished {
		return
	}
	js := m.jobs[m.cur]
	switch {
	case js == nil:
		m.planJob(0, nil)
	case !js.planned || js.committing:
	case js.committed:
		if m.cfg.mode == modeWhole || allTrue(js.commit.EOF) {
			m.finished = true
			m.emit(actDone{})
			return
		}
		m.planJob(js.id+1, js.commit)
	default:
		if !js.wmKnown && m.allMapsDone(js) {
			if err := m.computeWatermark(js); err != nil {
				m.fail(err)
				return
			}
			if !m.cfg.mapOnly {
				m.emit(actPhase{Job: js.id})
			}
		}
		if m.readyToCommit(js) && !m.rebuildsOutstanding() {
			m.startCommit(js)
		}
	}
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

// planJob plans finite job j after the commit prev (nil for the first).
func (m *machine) planJob(j int, prev *JobCommit) {
	n := m.cfg.splits
	p := JobPlan{Job: j, Starts: make([]int64, n), EOF: make([]bool, n), Ends: make([]int64, n)}
	if prev != nil {
		copy(p.Starts, prev.Ends)
		copy(p.EOF, prev.EOF)
		p.Tracker = prev.Tracker
	} else {
		p.Tracker = eventtime.NewTracker(n, m.cfg.maxDisorder).State()
	}
	for s := range p.Ends {
		p.Ends[s] = -1
		if m.cfg.mode == modeRecords && !p.EOF[s] {
			p.Ends[s] = p.Starts[s] + m.cfg.perSplit
		}
	}
	m.addJob(p)
	m.cur = j
	m.emit(actPersistPlan{Plan: p})
}

func (m *machine) startCommit(js *jobState) {
	c := JobCommit{Job: js.id, Ends: append([]int64(nil), js.plan.Starts...), EOF: append([]bool(nil), js.plan.EOF...),
		Tracker: js.trackerAfter}
	var parts []commitPart
	for _, s := range js.order {
		e := js.maps[s].mapEnt
		c.Ends[s] = e.End
		c.EOF[s] = c.EOF[s] || e.EOF
		c.Records += e.Records
		if m.cfg.mapOnly {
			parts = append(parts, commitPart{Subtask: s, File: e.Files[0], Producer: js.maps[s].id})
		}
	}
	for r, u := range js.reduces {
		parts = append(parts, commitPart{Subtask: r, File: u.redEnt.Out, Producer: u.id})
		c.LateRows += u.redEnt.LateRows
	}
	for _, p := range parts {
		c.RowsOut += p.File.Rows
	}
	js.committing = true
	js.pendCommit = &c
	m.emit(actCommit{Job: js.id, Attempt: m.nextAttempt(), Parts: parts, Commit: c})
}

func (m *machine) nextAttempt() int {
	m.seq++
	return m.inc*attemptStride + m.seq
}

// runnable lists pending units whose inputs exist, in dispatch order:
// re-runs of older jobs first, then the current job; maps before reduces.
func (m *machine) runnable() []*unitState {
	var out []*unitState
	for j := 0; j <= m.cur; j++ {
		js := m.jobs[j]
		if js == nil || !js.planned || js.committing {
			continue
		}
		if j < m.cur && !js.committed {
			continue
		}
		for _, s := range js.order {
			if u := js.maps[s]; u.status == stPending {
				out = append(out, u)
			}
		}
		if !m.allMapsDone(js) || (j == m.cur && !js.wmKnown) {
			continue
		}
		for r, u := range js.reduces {
			if u.status == stPending && m.stateReady(j, r) {
				out = append(out, u)
			}
		}
	}
	return out
}

// stateReady reports whether reduce unit r of job j has its carried state.
func (m *machine) stateReady(j, r int) bool {
	if !m.cfg.stateful || j == 0 {
		return true
	}
	prev := m.jobs[j-1]
	return prev != nil && prev.reduces[r].status == stDone
}

// schedule hands runnable units to idle workers. A unit whose last attempt
// died on worker w goes to another worker when one is alive: it waits for a
// busy one rather than take w's replacement, unless w's replacement is the
// only worker there is.
func (m *machine) schedule() {
	if m.failed || m.finished {
		return
	}
	units := m.runnable()
	// Units whose attempt died go first, so they are not starved of the
	// other worker they wait for.
	sort.SliceStable(units, func(a, b int) bool { return units[a].avoid >= 0 && units[b].avoid < 0 })
	for _, u := range units {
		w := m.pickWorker(u)
		if w < 0 {
			continue
		}
		m.dispatch(u, w)
	}
}

func (m *machine) pickWorker(u *unitState) int {
	fallback, othersBusy := -1, false
	for w, ws := range m.workers {
		switch {
		case !ws.alive:
		case ws.busy:
			if w != u.avoid {
				othersBusy = true
			}
		case w == u.avoid:
			fallback = w
		default:
			return w
		}
	}
	if othersBusy {
		return -1
	}
	return fallback
}

func (m *machine) dispatch(u *unitState, w int) {
	js := m.jobs[u.id.Job]
	u.status, u.attempt, u.worker = stRunning, m.nextAttempt(), w
	m.workers[w] = workerState{alive: true, busy: true, unit: u.id}
	a := actRun{Unit: u.id, Attempt: u.attempt, Worker: w}
	if u.id.Kind == kindMap {
		s := u.id.Index
		t := &mapTask{Job: js.id, Split: s, Start: js.plan.Starts[s], End: js.plan.Ends[s]}
		if e := u.mapEnt; e != nil {
			// A recorded unit re-run because its files were lost reads
			// exactly the range its entry fixed.
			t.Start, t.End, t.KnownEOF = e.Start, e.End, e.EOF
		}
		a.Map = t
	} else {
		r := u.id.Index
		t := &reduceTask{Job: js.id, Partition: r, PrevWM: js.prevWM, WM: js.wm, StateOnly: u.rebuild}
		for _, s := range js.order {
			mu := js.maps[s]
			t.Inputs = append(t.Inputs, reduceInput{Split: s, Port: m.cfg.ports[s], File: mu.mapEnt.Files[r], Producer: mu.id})
		}
		if m.cfg.stateful && js.id > 0 {
			prev := m.jobs[js.id-1].reduces[r]
			if prev.redEnt != nil && prev.redEnt.State != nil {
				ref := *prev.redEnt.State
				t.StateIn, t.StateProducer = &ref, prev.id
			}
		}
		a.Reduce = t
	}
	m.emit(a)
}

// inFlight lists the units with an attempt running or finishing.
func (m *machine) inFlight() []UnitID {
	var out []UnitID
	for j := 0; j <= m.cur; j++ {
		js := m.jobs[j]
		if js == nil {
			continue
		}
		for _, s := range js.order {
			if st := js.maps[s].status; st == stRunning || st == stFinishing {
				out = append(out, js.maps[s].id)
			}
		}
		for _, u := range js.reduces {
			if u.status == stRunning || u.status == stFinishing {
				out = append(out, u.id)
			}
		}
	}
	return out
}
