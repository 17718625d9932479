// Package diskphase runs a job the way Hadoop MapReduce (and Spark's
// shuffle files) do: as a sequence of finite jobs, each in two phases, disk
// to disk. There is no running picture of the job at all:
//
//   - phase 1: one map unit per input split (source partition × the finite
//     job's range) applies the job's stateless steps, partitions its rows
//     by key group into --parallelism reduce partitions and materialises
//     one Parquet file per (unit, partition) in durable shared storage;
//   - phase 2: one reduce unit per partition restores the state the
//     previous finite job carried over (a Parquet table), reads its file
//     from every map unit, runs the keyed operator, and materialises its
//     output and its new state;
//   - the job commit writes the staged outputs through the sink under the
//     finite job's epoch and records a _SUCCESS marker.
//
// A ledger in durable storage records which units finished. A unit whose
// worker dies is re-run alone, on another worker when there is one; a
// materialised file found missing or corrupt sends only the unit that
// produced it back to work; a coordinator that crashes is replaced by one
// that rebuilds the plan and the ledger from storage and redoes nothing
// the ledger holds.
//
// The coordinator's plan and ledger logic is a pure state machine
// (machine.go, see below); the coordinator is the I/O loop around it,
// units.go the work of one unit attempt, points.go the named crash
// points, table.go the Parquet encoding. See docs/diskphase.md for the
// storage layout, the crash points, the metrics and the measured costs.
//
// # The plan and ledger machine
//
// The machine decides what to persist, what to run where, what to record
// and when to commit, in the manner of etcd's raft package: Step takes
// one event (a plan became durable, a unit attempt succeeded or its worker
// died, a file was found missing or corrupt, a ledger entry or a commit
// marker became durable) and returns the actions to carry out, in order.
// It does no I/O, starts no goroutine and reads no clock, so every order
// of events is tested without them (see testdata/machine). Restarting a
// coordinator is restore, a pure function from what durable storage holds
// to a machine; its first event is evStarted.
//
// Each unit (a map unit per split, a reduce unit per partition, of one
// finite job) goes through
//
//	           Run                AttemptSucceeded          LedgerRecorded
//	pending ---------> running ----(Record)----> finishing ---------------> done
//	   ^                  |                          |                       |
//	   +--AttemptCrashed--+                          |                       |
//	   |  (or its worker lost; FileBad: an input     |                       |
//	   |   is gone, the producer runs first)         |                       |
//	   +------------- coordinator restart -----------+                       |
//	   +------- FileBad / CommitFileBad naming a file the unit made ---------+
//
// A unit is done only once its ledger entry is durable: a restart keeps
// exactly the done units and runs every other one again. A finite job
// goes through
//
//	PersistPlan --PlanPersisted--> map phase --every map unit done (Phase)-->
//	reduce phase --every reduce unit done, no older unit re-running (Commit)-->
//	committing --Committed (Collect)--> committed --> PersistPlan of the next
//	job, or Done once every split is at its end (or in whole mode)
//
// and a commit that finds a staged file damaged (CommitFileBad) goes back
// to the phase of the unit that made it. Reports about an attempt the
// machine has given up (a dead worker's late words) are ignored. An
// attempt that fails for a reason a re-run cannot cure, files of one unit
// lost too often, or an event the machine cannot accept in its state (any
// event before evStarted, a second evStarted) come out as actFail; after
// it, and after actDone, the machine answers nothing.
//
// # Driving the machine
//
// The slice Step returns is the machine's buffer, valid until the next
// Step: copy what you keep. The coordinator carries out each action, and
// feeds the events they cause, one at a time, through the same queue as
// the reports of unit attempts:
//
//	m, err := restore(cfg, incarnation, durable) // what storage holds
//	queue := []event{evStarted{}}
//	for {
//		for len(queue) > 0 {
//			ev := queue[0]
//			queue = queue[1:]
//			for _, a := range m.Step(ev) {
//				switch a := a.(type) {
//				case actPersistPlan:
//					// The plan is durable before any unit of it runs.
//					put(jobPlan(a.Plan.Job), a.Plan)
//					queue = append(queue, evPlanPersisted{Job: a.Plan.Job})
//				case actRun:
//					// Its outcome comes back later as evAttemptSucceeded,
//					// evAttemptCrashed, evFileBad or evAttemptFailed.
//					startAttempt(a)
//				case actRecord:
//					// The unit counts as done only after this put.
//					put(ledger(a.Unit), a.Map or a.Reduce)
//					queue = append(queue, evLedgerRecorded{Unit: a.Unit, Attempt: a.Attempt})
//				case actReplaceWorker:
//					queue = append(queue, evWorkerUp{Worker: a.Worker})
//				case actCommit:
//					// Sink commit under the job's epoch, then the marker.
//					queue = append(queue, commit(a)) // evCommitted or evCommitFileBad
//				case actCollect:
//					deleteUnneededFiles(a.Job)
//				case actDone:
//					return nil
//				case actFail:
//					return a.Err
//				}
//			}
//		}
//		queue = append(queue, nextAttemptReport()) // blocks
//	}
package diskphase
