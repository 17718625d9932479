package diskphase

import (
	"fmt"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

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
		c.RowsOut += p.File.totalRows()
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
