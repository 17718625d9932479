package diskphase

import (
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
)

// Named crash points (rewind run --executor diskphase --list-fail-points).
//
// A unit point kills the worker running the attempt that reaches it: the
// attempt's memory dies with it and the unit runs again on another
// attempt. A coordinator or job point kills the coordinator; a fresh one
// restarts from the durable plans and ledger entries. The occurrence K of
// --fail point=NAME,occurrence=K counts every time any attempt (or the
// coordinator) reaches NAME. docs/diskphase.md tabulates what each one
// loses and what runs again.
const (
	// pointMidRead: a unit has processed its first input batch (map) or
	// file (reduce); nothing of its output exists yet (worker).
	pointMidRead = "unit.mid-read"
	// pointMidWrite: half-way through encoding an attempt's first file;
	// storage never sees a prefix of it (worker).
	pointMidWrite = "unit.mid-write"
	// pointBeforeLedger: every file of the attempt is durable and the
	// success is not reported; its files become garbage (worker).
	pointBeforeLedger = "unit.after-write-before-ledger"
	// pointBeforeCommit: every unit of the job is recorded, nothing is
	// written to the sink (coordinator).
	pointBeforeCommit = "job.before-commit"
	// pointMidCommit: the first partition is written to the sink, the rest
	// is not; reached once even when nothing is written (coordinator).
	pointMidCommit = "job.mid-commit"
	// pointAfterPartition: the first partition is written to the sink
	// and (append) marked published; the job's sink record and _SUCCESS
	// are not written. Reached once per commit, as pointMidCommit is
	// (coordinator).
	pointAfterPartition = "job.after-partition"
	// pointAfterCommit: the job's _SUCCESS marker is durable (coordinator).
	pointAfterCommit = "job.after-commit"
	// pointAfterPlan: the job plan is durable, no unit runs yet
	// (coordinator).
	pointAfterPlan = "coordinator.after-plan"
	// pointBeforeRecord: a unit reported success and its ledger entry is
	// not written (coordinator).
	pointBeforeRecord = "coordinator.before-ledger"
	// pointAfterRecord: the ledger entry is durable, the machine has not
	// been told (coordinator).
	pointAfterRecord = "coordinator.after-ledger"
	// pointPhase: the map phase is done, the reduces are dispatched but
	// not started (coordinator).
	pointPhase = "coordinator.between-phases"
)

// failPoints is the list FailPoints returns.
var failPoints = []string{
	pointMidRead, pointMidWrite, pointBeforeLedger,
	pointBeforeCommit, pointMidCommit, pointAfterPartition, pointAfterCommit,
	pointAfterPlan, pointBeforeRecord, pointAfterRecord, pointPhase,
}

// point passes the named coordinator crash point; the crash is returned
// like any other error of the action, which ends this coordinator. A
// worker kill that fires here (at-point, or after-point once its records
// are read) is queued for the loop, which kills that worker as a kill at a
// read does; the coordinator goes on.
func (c *coordinator) point(name string) error {
	err := c.x.env.Faults.Point(name, fault.Coordinator)
	if cr, ok := fault.AsCrash(err); ok && cr.Worker != fault.Coordinator {
		c.kills = append(c.kills, killRequest{crash: cr, at: time.Now()})
		return nil
	}
	return err
}
