package diskphase

import "sort"

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
