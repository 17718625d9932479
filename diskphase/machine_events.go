package diskphase

// event is an input of the machine: something that happened. The set is
// closed; each event prints as one line (machine_text.go).
type event interface {
	isEvent()
	String() string
}

type (
	// evStarted: the coordinator restored the machine (restore) and is
	// ready to act; always the first event.
	evStarted          struct{}
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

func (evStarted) isEvent()          {}
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

// action is an output of the machine, carried out by the coordinator in
// order. The set is closed; each action prints as one line. actFail stops
// the run.
type action interface {
	isAction()
	String() string
}

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
