// Package mistake names the deliberately wrong variants of the recovery
// protocols that `rewind trace --teach` runs beside the right ones, and
// carries the one mistake a run makes.
//
// A mistake reaches an executor only through run.Env.Mistake, which only
// the trace command's teach modes set, after run.Prepare: nothing in
// run.Config, no flag of `rewind run` or `rewind bench`, and no executor
// Options can switch one on. An executor that can make a mistake lists it
// in its Traits.Mistakes and checks Env.Mistake.Is(name) at the one place
// the protocol goes wrong; a nil *Plan makes no mistake, so in every
// ordinary run the check costs a nil test.
//
// The executor also logs what it did wrong (Plan.Did): the exact records
// it skipped, saved twice or dropped. The teach mode predicts the damage
// from that log and the input alone, before it looks at the output, and
// then checks the wrong run's result differs from the reference in exactly
// that way.
package mistake

import "sync"

// Name is one wrong variant, the value of --teach.
type Name string

// The classic mistakes.
const (
	// OffsetBehind saves each source's read position Plan.Records
	// records behind the cut: after a restore the records between the
	// saved position and the cut are counted twice.
	OffsetBehind Name = "offset-behind"
	// OffsetAhead saves it Plan.Records records ahead of the cut: those
	// records are skipped.
	OffsetAhead Name = "offset-ahead"
	// WallClock has every task save its part "at the same instant" (on
	// a clock, with no marker): records in flight between tasks at that
	// instant are in neither the sender's saved position nor the
	// receiver's saved state.
	WallClock Name = "wall-clock"
	// UnalignedNoInflight lets barriers overtake records without
	// persisting the overtaken ones: exactly those records are missing
	// after a restore.
	UnalignedNoInflight Name = "unaligned-no-inflight"
	// PartialPoint resumes from a recovery point whose parts were not
	// all durable: some tasks restore one point, others an older one.
	PartialPoint Name = "partial-point"
	// RestartNoRestore restarts after the crash without restoring state:
	// the sources go on from where they were, the counts start from zero.
	RestartNoRestore Name = "restart-no-restore"
	// StopTheWorld is correct: every source pauses, the channels drain,
	// every task saves, then all resume; throughput falls to zero for the
	// pause, where a marker's costs a dip.
	StopTheWorld Name = "stop-the-world"
	// MarkerInMicrobatch sends a marker through each micro-batch as well
	// as cutting at its seam: the marker adds cost and nothing else.
	MarkerInMicrobatch Name = "marker-in-microbatch"
	// AppendAfterReplay writes to an append sink: the executor's state is
	// right after the replay, the destination holds the replayed rows
	// twice.
	AppendAfterReplay Name = "append-after-replay"
	// ForgetfulSource reads a source that cannot give records back: the
	// records in flight at the crash are a gap, counted exactly.
	ForgetfulSource Name = "forgetful-source"
)

// All is every mistake, in the order `rewind trace --teach list` shows them.
var All = []Name{
	OffsetBehind, OffsetAhead, WallClock, UnalignedNoInflight, PartialPoint,
	RestartNoRestore, StopTheWorld, MarkerInMicrobatch, AppendAfterReplay, ForgetfulSource,
}

// Plan is the one mistake a run makes, its size, and the log of what the
// executor did wrong. Safe for concurrent use; a nil *Plan makes no
// mistake and logs nothing.
type Plan struct {
	Name Name
	// Records is the mistake's size where it has one: how many records
	// the saved read position lags (OffsetBehind) or leads (OffsetAhead)
	// the cut. 0 where the mistake has no size.
	Records int64

	mu    sync.Mutex
	steps []Step
}

// Step is one wrong thing the executor did, precise enough to predict the
// damage from it and the input alone.
type Step struct {
	// Point is the recovery point (checkpoint, batch) the step concerns.
	Point int64 `json:"point"`
	// Task is the task that took it ("src/in/p0", "op/agg/1"), as the
	// time-space diagram names lanes.
	Task string `json:"task,omitempty"`
	// Input and Partition locate the records the step concerns, by their
	// offsets [From, To) in that partition of that input.
	Input     string `json:"input,omitempty"`
	Partition int    `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	// IDs name the records themselves where they are not one offset range
	// of one partition (the records in flight on a channel).
	IDs  []int64 `json:"ids,omitempty"`
	Note string  `json:"note,omitempty"`
}

// Is reports whether p makes mistake n.
func (p *Plan) Is(n Name) bool { return p != nil && p.Name == n }

// Did logs a wrong step.
func (p *Plan) Did(s Step) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.steps = append(p.steps, s)
	p.mu.Unlock()
}

// Steps is what the executor logged, in order.
func (p *Plan) Steps() []Step {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Step(nil), p.steps...)
}
