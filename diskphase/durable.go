package diskphase

// This file holds what the coordinators read from durable storage before
// they start: the run plan check, the listing of the run's namespace and
// its small records, what a resumed process restores from them, and the
// error naming the objects storage lost (historyGap).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// resumedFrom is what a resumed process restores: the newest committed
// finite job, and the records read by the map units the ledger holds as
// finished (of every job, committed or not), which no coordinator runs
// again unless a file they made is lost.
func resumedFrom(d *durableState) *report.ResumedFrom {
	rf := &report.ResumedFrom{Kind: "finite job"}
	for j := range d.commits {
		if id := int64(j); rf.ID == nil || id > *rf.ID {
			rf.ID = &id
		}
	}
	for _, e := range d.maps {
		rf.RecordsBefore += e.Records
	}
	return rf
}

// checkRunPlan writes run.json on the first start and checks it after.
func (x *execution) checkRunPlan(ctx context.Context) error {
	name := x.names.runPlan()
	data, err := x.store.Get(ctx, name)
	if errors.Is(err, storage.ErrNotFound) {
		b, err := json.Marshal(x.plan)
		if err != nil {
			return err
		}
		return x.store.Put(ctx, name, b)
	}
	if err != nil {
		return fmt.Errorf("reading the run plan: %w", err)
	}
	var got RunPlan
	if err := json.Unmarshal(data, &got); err != nil {
		return fmt.Errorf("reading the run plan %s: %w", name, err)
	}
	if !got.equal(x.plan) {
		return fmt.Errorf("the run plan in %s is for another run (%+v), not this one (%+v)", name, got, x.plan)
	}
	return nil
}

// loadDurable lists the run's namespace and reads its small records: the
// only input of restore().
func (x *execution) loadDurable(ctx context.Context) (*durableState, error) {
	d := emptyDurable()
	objs, err := x.store.List(ctx, x.names.root)
	if err != nil {
		return nil, err
	}
	get := func(name string, v any) error {
		data, err := x.store.Get(ctx, name)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		return nil
	}
	for _, o := range objs {
		p := x.names.parse(o.Name)
		switch p.kind {
		case objJobPlan:
			var jp JobPlan
			if err := get(o.Name, &jp); err != nil {
				return nil, err
			}
			if jp.Job != p.job {
				return nil, fmt.Errorf("%s holds the plan of job %d", o.Name, jp.Job)
			}
			d.plans[p.job] = jp
		case objSuccess:
			var jc JobCommit
			if err := get(o.Name, &jc); err != nil {
				return nil, err
			}
			d.commits[p.job] = &jc
		case objLedger:
			if p.unit.Kind == kindMap {
				var e MapEntry
				if err := get(o.Name, &e); err != nil {
					return nil, err
				}
				d.maps[p.unit] = &e
			} else {
				var e ReduceEntry
				if err := get(o.Name, &e); err != nil {
					return nil, err
				}
				d.reduces[p.unit] = &e
			}
		}
	}
	return d, nil
}

// historyGap names the objects durable storage lost (HistoryGapError) and
// what the user can do: nothing resumes a run whose history has holes.
func (x *execution) historyGap(gap HistoryGapError) error {
	var missing []string
	var yet string
	switch {
	case gap.NoPlan:
		missing, yet = []string{x.names.jobPlan(gap.Job)}, "later jobs were planned"
	case gap.NoCommit:
		missing, yet = []string{x.names.success(gap.Job)}, fmt.Sprintf("job %d was planned (%s is in storage)", gap.Job+1, x.names.jobPlan(gap.Job+1))
	default:
		for _, u := range gap.Missing {
			missing = append(missing, x.names.ledger(u))
		}
		yet = fmt.Sprintf("job %d is committed (%s is in storage)", gap.Job, x.names.success(gap.Job))
	}
	return fmt.Errorf("%s missing from durable storage, yet %s: storage lost part of the run's history, so the run cannot be resumed; start a new run (--overwrite, with fresh --storage)",
		strings.Join(missing, ", "), yet)
}
