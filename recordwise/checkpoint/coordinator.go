package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Defaults applied by NewCoordinator to zero Config fields.
const (
	// DefaultRetained is how many completed checkpoints are kept
	// (retained-checkpoints). Two, so that one complete fallback survives
	// if the newest turns out to be unreadable.
	DefaultRetained = 2
	// DefaultMaxConcurrent is how many checkpoints may be pending at once.
	DefaultMaxConcurrent = 1
	// DefaultTimeout bounds how long a checkpoint may collect acks.
	DefaultTimeout = 10 * time.Minute
	// DefaultHistory is how many finished checkpoints Stats remembers.
	DefaultHistory = 32
)

// Config configures a Coordinator.
type Config struct {
	// Tasks lists every task that must acknowledge each checkpoint:
	// sources, operator subtasks and sinks. Required, no duplicates.
	Tasks []TaskID
	// MaxConcurrent caps pending checkpoints. A Trigger at the cap is
	// skipped, not queued and not subsuming (see Coordinator.Trigger).
	// Default DefaultMaxConcurrent.
	MaxConcurrent int
	// Timeout is how long a checkpoint may take from trigger until every
	// part is durable. Default DefaultTimeout.
	Timeout time.Duration
	// Retained is how many completed checkpoints to keep; older ones are
	// deleted with DeleteOld. Default DefaultRetained.
	Retained int
	// History is how many finished checkpoints Stats can still describe.
	// Default DefaultHistory.
	History int
	// NextID is the ID of the first checkpoint this coordinator triggers.
	// After a restart use RestorePlan.NextID. Default: one past the newest
	// of Completed, or 1.
	NextID ID
	// Completed lists the complete checkpoints already in storage
	// (RestorePlan.Complete), so retention counts them. Any order.
	Completed []ID
}

// Status is where a checkpoint stands.
type Status uint8

// The statuses of a checkpoint, in the order a successful one passes them.
const (
	// Collecting: triggered, waiting for every task's durable part.
	Collecting Status = iota + 1
	// WritingMetadata: every part is durable, WriteMetadata was issued and
	// its confirmation has not arrived. Timeouts, declines and task
	// failures no longer abort it, because the metadata write may land.
	WritingMetadata
	// Completed: the metadata object is written; it is a recovery point.
	Completed
	// Failed: abandoned for a Reason whose Failure() is true.
	Failed
	// Aborted: abandoned deliberately (subsumed or stopped).
	Aborted
)

// String implements fmt.Stringer.
func (s Status) String() string {
	switch s {
	case Collecting:
		return "collecting"
	case WritingMetadata:
		return "writing metadata"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// TaskAck is one task's acknowledgement of one checkpoint.
type TaskAck struct {
	Task TaskID
	// Acked is when the task first acknowledged.
	Acked time.Time
	// Durable is when its part became durable (a durable Ack or
	// PartsWritten); zero while it is not.
	Durable time.Time
	// Part is the part as last reported.
	Part Part
}

// Stats is the metrics data of one checkpoint. Times are the ones passed to
// the coordinator's inputs, so end-to-end duration is Finished - Triggered.
type Stats struct {
	ID     ID
	Status Status
	// Triggered is the time passed to the Trigger that started it.
	Triggered time.Time
	// AllDurable is when the last part became durable and WriteMetadata
	// was issued; zero if that never happened.
	AllDurable time.Time
	// Finished is when it completed (MetadataWritten) or was abandoned;
	// zero while pending.
	Finished time.Time
	// Reason is why it was abandoned; zero otherwise.
	Reason Reason
	// Acks lists the tasks that acknowledged, in Config.Tasks order.
	Acks []TaskAck
	// Sums over the acknowledged parts.
	StateBytes      int64
	InFlightBytes   int64
	InFlightRecords int64
}

// Duration is the end-to-end duration, trigger to finish; zero while the
// checkpoint is pending.
func (s Stats) Duration() time.Duration {
	if s.Finished.IsZero() {
		return 0
	}
	return s.Finished.Sub(s.Triggered)
}

// String prints the figures of a checkpoint in one line, for traces.
func (s Stats) String() string {
	return fmt.Sprintf("(%v, %d acks, state=%dB, in-flight=%d/%dB, took %v)",
		s.Status, len(s.Acks), s.StateBytes, s.InFlightRecords, s.InFlightBytes, s.Duration())
}

// Counts counts checkpoints by outcome. Triggered = Completed + Failed +
// Aborted + the ones still pending; Skipped counts triggers that started
// nothing.
type Counts struct {
	Triggered int
	Completed int
	Failed    int
	Aborted   int
	Skipped   int
}

// pending is the coordinator's record of one unfinished checkpoint.
type pending struct {
	stats   Stats
	acks    []TaskAck // indexed like Config.Tasks; zero Task = not acked yet
	durable int       // acks whose part is durable
}

// Coordinator is the checkpoint coordinator's state machine: inputs go in
// through Step, actions come out. It is not safe for concurrent use; the
// I/O loop owns it and calls it from one goroutine.
type Coordinator struct {
	cfg       Config
	taskIndex map[TaskID]int
	nextID    ID
	pending   []*pending // ascending ID
	completed []ID       // retained, ascending
	history   []Stats    // finished, oldest first, at most cfg.History
	counts    Counts
	stopped   bool
}

// NewCoordinator validates cfg, applies defaults and returns a coordinator
// with nothing pending.
func NewCoordinator(cfg Config) (*Coordinator, error) {
	if len(cfg.Tasks) == 0 {
		return nil, errors.New("checkpoint: config: no tasks")
	}
	idx := make(map[TaskID]int, len(cfg.Tasks))
	for i, t := range cfg.Tasks {
		if t == "" {
			return nil, errors.New("checkpoint: config: empty task id")
		}
		if _, dup := idx[t]; dup {
			return nil, fmt.Errorf("checkpoint: config: duplicate task %q", t)
		}
		idx[t] = i
	}
	cfg.Tasks = slices.Clone(cfg.Tasks)
	var err error
	if cfg.MaxConcurrent, err = orDefault("max concurrent", cfg.MaxConcurrent, DefaultMaxConcurrent); err != nil {
		return nil, err
	}
	if cfg.Retained, err = orDefault("retained", cfg.Retained, DefaultRetained); err != nil {
		return nil, err
	}
	if cfg.History, err = orDefault("history", cfg.History, DefaultHistory); err != nil {
		return nil, err
	}
	switch {
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("checkpoint: config: negative timeout %v", cfg.Timeout)
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	}
	done := slices.Clone(cfg.Completed)
	slices.Sort(done)
	done = slices.Compact(done)
	newest := ID(0)
	if len(done) > 0 {
		newest = done[len(done)-1]
	}
	switch {
	case cfg.NextID == 0:
		cfg.NextID = newest + 1
	case cfg.NextID <= newest:
		// Reusing an ID would let a new checkpoint's parts mix with a
		// complete one's under the same storage location.
		return nil, fmt.Errorf("checkpoint: config: next id %d not above completed checkpoint %d", cfg.NextID, newest)
	}
	cfg.Completed = done
	return &Coordinator{cfg: cfg, taskIndex: idx, nextID: cfg.NextID, completed: done}, nil
}

func orDefault(name string, v, def int) (int, error) {
	switch {
	case v < 0:
		return 0, fmt.Errorf("checkpoint: config: negative %s %d", name, v)
	case v == 0:
		return def, nil
	}
	return v, nil
}

// Step takes one input and returns the actions it decided; carry them out
// in the order given. The returned slice is only valid until the next
// Step: copy what you keep. (Today every Step returns a fresh slice, but
// that is not part of the contract.) An input of a type the coordinator
// does not know comes out as Fail.
func (c *Coordinator) Step(in Input) []Action {
	switch in := in.(type) {
	case Trigger:
		return c.trigger(in.Now)
	case Ack:
		return c.ack(in.Now, in.ID, in.Task, in.Part)
	case PartsWritten:
		return c.partsWritten(in.Now, in.ID)
	case MetadataWritten:
		return c.metadataWritten(in.Now, in.ID)
	case MetadataFailed:
		return c.metadataFailed(in.Now, in.ID, in.Err)
	case Decline:
		return c.decline(in.Now, in.ID, in.Task, in.Reason)
	case Timeout:
		return c.timeout(in.Now, in.ID)
	case TaskFailed:
		return c.taskFailed(in.Now, in.Task)
	case Stop:
		return c.stop(in.Now)
	}
	return []Action{Fail{Err: fmt.Errorf("checkpoint: coordinator does not take input %T", in)}}
}

// trigger handles Trigger (see its doc).
func (c *Coordinator) trigger(now time.Time) []Action {
	if c.stopped {
		return nil
	}
	if len(c.pending) >= c.cfg.MaxConcurrent {
		c.counts.Skipped++
		return []Action{TriggerSkipped{At: now, Pending: c.Pending()}}
	}
	id := c.nextID
	c.nextID++
	c.counts.Triggered++
	c.pending = append(c.pending, &pending{
		stats: Stats{ID: id, Status: Collecting, Triggered: now},
		acks:  make([]TaskAck, len(c.cfg.Tasks)),
	})
	return []Action{
		InjectBarrier{ID: id, At: now},
		ScheduleTimeout{ID: id, After: c.cfg.Timeout},
	}
}

// ack handles Ack (see its doc).
func (c *Coordinator) ack(now time.Time, id ID, task TaskID, part Part) []Action {
	p := c.collecting(id)
	if p == nil {
		return nil
	}
	i, ok := c.taskIndex[task]
	if !ok {
		return nil
	}
	a := &p.acks[i]
	if !a.Durable.IsZero() {
		return nil
	}
	if a.Task == "" {
		a.Task, a.Acked = task, now
	}
	a.Part = part
	if part.Durable {
		a.Durable = now
		p.durable++
	}
	return c.maybeWriteMetadata(now, p)
}

// partsWritten handles PartsWritten (see its doc).
func (c *Coordinator) partsWritten(now time.Time, id ID) []Action {
	p := c.collecting(id)
	if p == nil {
		return nil
	}
	for i := range p.acks {
		a := &p.acks[i]
		if a.Task != "" && a.Durable.IsZero() {
			a.Durable = now
			a.Part.Durable = true
			p.durable++
		}
	}
	return c.maybeWriteMetadata(now, p)
}

func (c *Coordinator) maybeWriteMetadata(now time.Time, p *pending) []Action {
	if p.durable < len(c.cfg.Tasks) {
		return nil
	}
	p.stats.Status = WritingMetadata
	p.stats.AllDurable = now
	parts := make([]TaskPart, len(p.acks))
	for i, a := range p.acks {
		parts[i] = TaskPart{Task: a.Task, Part: a.Part}
	}
	return []Action{WriteMetadata{ID: p.stats.ID, Parts: parts}}
}

// metadataWritten handles MetadataWritten (see its doc).
func (c *Coordinator) metadataWritten(now time.Time, id ID) []Action {
	p := c.find(id)
	if p == nil || p.stats.Status != WritingMetadata {
		return nil
	}
	if n := len(c.completed); n > 0 && c.completed[n-1] > id {
		return c.abandon(now, p, Subsumed, "", "")
	}
	var out []Action
	for _, q := range slices.Clone(c.pending) {
		if q.stats.ID < id && q.stats.Status == Collecting {
			out = append(out, c.abandon(now, q, Subsumed, "", "")...)
		}
	}
	c.remove(p)
	p.stats.Status = Completed
	p.stats.Finished = now
	c.counts.Completed++
	st := c.finish(p)
	c.completed = append(c.completed, id)
	out = append(out, NotifyComplete{ID: id, Stats: st})
	if extra := len(c.completed) - c.cfg.Retained; extra > 0 {
		old := slices.Clone(c.completed[:extra])
		c.completed = slices.Delete(c.completed, 0, extra)
		out = append(out, DeleteOld{IDs: old})
	}
	return out
}

// metadataFailed handles MetadataFailed (see its doc).
func (c *Coordinator) metadataFailed(now time.Time, id ID, err error) []Action {
	p := c.find(id)
	if p == nil || p.stats.Status != WritingMetadata {
		return nil
	}
	detail := ""
	if err != nil {
		detail = err.Error()
	}
	return c.abandon(now, p, MetadataFailure, "", detail)
}

// decline handles Decline (see its doc).
func (c *Coordinator) decline(now time.Time, id ID, task TaskID, reason string) []Action {
	p := c.collecting(id)
	if p == nil {
		return nil
	}
	if _, ok := c.taskIndex[task]; !ok {
		return nil
	}
	return c.abandon(now, p, Declined, task, reason)
}

// timeout handles Timeout (see its doc).
func (c *Coordinator) timeout(now time.Time, id ID) []Action {
	p := c.collecting(id)
	if p == nil {
		return nil
	}
	return c.abandon(now, p, TimedOut, "", "")
}

// taskFailed handles TaskFailed (see its doc).
func (c *Coordinator) taskFailed(now time.Time, task TaskID) []Action {
	if _, ok := c.taskIndex[task]; !ok {
		return nil
	}
	return c.abandonCollecting(now, TaskFailure, task)
}

// stop handles Stop (see its doc).
func (c *Coordinator) stop(now time.Time) []Action {
	c.stopped = true
	return c.abandonCollecting(now, Stopped, "")
}

func (c *Coordinator) abandonCollecting(now time.Time, r Reason, task TaskID) []Action {
	var out []Action
	for _, p := range slices.Clone(c.pending) {
		if p.stats.Status == Collecting {
			out = append(out, c.abandon(now, p, r, task, "")...)
		}
	}
	return out
}

func (c *Coordinator) abandon(now time.Time, p *pending, r Reason, task TaskID, detail string) []Action {
	c.remove(p)
	if r.Failure() {
		p.stats.Status = Failed
		c.counts.Failed++
	} else {
		p.stats.Status = Aborted
		c.counts.Aborted++
	}
	p.stats.Reason = r
	p.stats.Finished = now
	st := c.finish(p)
	return []Action{
		Abort{ID: st.ID, Reason: r, Task: task, Detail: detail, Stats: st},
		DiscardParts{ID: st.ID},
	}
}

// finish moves p's stats into the bounded history and returns a copy that
// shares nothing with it.
func (c *Coordinator) finish(p *pending) Stats {
	st := p.snapshot()
	c.history = append(c.history, st)
	if n := len(c.history) - c.cfg.History; n > 0 {
		c.history = slices.Delete(c.history, 0, n)
	}
	st.Acks = slices.Clone(st.Acks)
	return st
}

func (p *pending) snapshot() Stats {
	st := p.stats
	st.Acks = nil
	for _, a := range p.acks {
		if a.Task == "" {
			continue
		}
		st.Acks = append(st.Acks, a)
		st.StateBytes += a.Part.StateBytes
		st.InFlightBytes += a.Part.InFlightBytes
		st.InFlightRecords += a.Part.InFlightRecords
	}
	return st
}

func (c *Coordinator) find(id ID) *pending {
	for _, p := range c.pending {
		if p.stats.ID == id {
			return p
		}
	}
	return nil
}

func (c *Coordinator) collecting(id ID) *pending {
	if p := c.find(id); p != nil && p.stats.Status == Collecting {
		return p
	}
	return nil
}

func (c *Coordinator) remove(p *pending) {
	if i := slices.Index(c.pending, p); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
	}
}

// Pending lists the checkpoints triggered and not yet finished, ascending.
func (c *Coordinator) Pending() []ID {
	ids := make([]ID, len(c.pending))
	for i, p := range c.pending {
		ids[i] = p.stats.ID
	}
	return ids
}

// Completed lists the retained complete checkpoints, ascending.
func (c *Coordinator) Completed() []ID { return slices.Clone(c.completed) }

// Latest returns the newest complete checkpoint, if any.
func (c *Coordinator) Latest() (ID, bool) {
	if len(c.completed) == 0 {
		return 0, false
	}
	return c.completed[len(c.completed)-1], true
}

// Counts returns the outcome counters.
func (c *Coordinator) Counts() Counts { return c.counts }

// Stats describes checkpoint id if it is pending or among the last
// Config.History finished ones.
func (c *Coordinator) Stats(id ID) (Stats, bool) {
	if p := c.find(id); p != nil {
		return p.snapshot(), true
	}
	for i := len(c.history) - 1; i >= 0; i-- {
		if c.history[i].ID == id {
			st := c.history[i]
			st.Acks = slices.Clone(st.Acks)
			return st, true
		}
	}
	return Stats{}, false
}
