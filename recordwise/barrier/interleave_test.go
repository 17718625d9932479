package barrier

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// This file checks the acceptance criterion of issue #4 exhaustively: for
// every interleaving of short per-channel sequences of records, barriers and
// ends (and, in timeout mode, of the alignment timer firing), the snapshot a
// handler asks for, plus the channel state it persists, covers exactly the
// records ahead of the barrier on every channel.

type evKind uint8

const (
	evRecord evKind = iota
	evBarrier
	evEnd
	evTimer
	evCancel
)

// ev is one input of a scenario. Record ids are small so that sets of
// records are bit masks: channel c's k-th record is c*16+k.
type ev struct {
	kind evKind
	ch   Channel
	rec  int
	id   checkpoint.ID
}

func (e ev) String() string {
	switch e.kind {
	case evRecord:
		return fmt.Sprintf("r%d", e.rec)
	case evBarrier:
		return fmt.Sprintf("B%d@%d", e.id, e.ch)
	case evEnd:
		return fmt.Sprintf("E@%d", e.ch)
	case evCancel:
		return fmt.Sprintf("X%d", e.id)
	}
	return fmt.Sprintf("T%d", e.id)
}

const maxID = 4

// scenario is a set of per-channel input sequences, optionally with a
// pseudo-channel of timer firings, plus what the snapshots must contain.
type scenario struct {
	name  string
	seqs  [][]ev // per channel; the timer pseudo-channel last, if any
	chans int
	recs  [][]int           // per channel, record ids in order
	pre   [maxID + 1]uint64 // records ahead of barrier n on every channel
	ids   []checkpoint.ID   // barrier ids used
	all   uint64
}

// newScenario parses one spec per channel ("r r B1 r E") followed by
// optional pseudo-channels of timer firings ("T1 T2") or cancellations
// ("X1").
func newScenario(specs ...string) *scenario {
	s := &scenario{name: strings.Join(specs, " | ")}
	for i, spec := range specs {
		var seq []ev
		if spec[0] == 'T' || spec[0] == 'X' {
			for _, tok := range strings.Fields(spec) {
				id, _ := strconv.Atoi(tok[1:])
				k := evTimer
				if tok[0] == 'X' {
					k = evCancel
				}
				seq = append(seq, ev{kind: k, id: checkpoint.ID(id)})
			}
			s.seqs = append(s.seqs, seq)
			continue
		}
		c := Channel(i)
		s.chans++
		var recs []int
		for _, tok := range strings.Fields(spec) {
			switch tok[0] {
			case 'r':
				r := int(c)*16 + len(recs)
				recs = append(recs, r)
				s.all |= 1 << r
				seq = append(seq, ev{kind: evRecord, ch: c, rec: r})
			case 'B':
				id, _ := strconv.Atoi(tok[1:])
				seq = append(seq, ev{kind: evBarrier, ch: c, id: checkpoint.ID(id)})
			case 'E':
				seq = append(seq, ev{kind: evEnd, ch: c})
			default:
				panic("bad token " + tok)
			}
		}
		s.recs = append(s.recs, recs)
		s.seqs = append(s.seqs, seq)
	}
	for n := checkpoint.ID(1); n <= maxID; n++ {
		used := false
		for _, seq := range s.seqs[:s.chans] {
			// Records ahead of barrier n; a channel without barrier n
			// (it ends first) contributes all its records.
			for _, e := range seq {
				if e.kind == evBarrier && e.id == n {
					used = true
					break
				}
				if e.kind == evRecord {
					s.pre[n] |= 1 << e.rec
				}
			}
		}
		if used {
			s.ids = append(s.ids, n)
		}
	}
	return s
}

// interleavings calls f with every interleaving of s's sequences (the
// order slice is reused between calls) and returns how many there were.
func (s *scenario) interleavings(f func(order []ev) error) (int, error) {
	total := 0
	for _, q := range s.seqs {
		total += len(q)
	}
	order := make([]ev, 0, total)
	idx := make([]int, len(s.seqs))
	count := 0
	var rec func() error
	rec = func() error {
		if len(order) == total {
			count++
			return f(order)
		}
		for i, q := range s.seqs {
			if idx[i] == len(q) {
				continue
			}
			order = append(order, q[idx[i]])
			idx[i]++
			err := rec()
			idx[i]--
			order = order[:len(order)-1]
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := rec()
	return count, err
}

// multinomial is the number of interleavings of sequences of these lengths.
func multinomial(lens ...int) int {
	n, res := 0, 1
	for _, l := range lens {
		for i := 1; i <= l; i++ {
			n++
			res = res * n / i // exact: a running binomial product
		}
	}
	return res
}

// driver is what the checker drives: a Handler, or a deliberately broken
// wrapper around one.
type driver interface {
	Step(Input) []Action
}

// model applies a handler's actions to a model of the operator: the set of
// processed records, the snapshots and the persisted channel state.
type model struct {
	s         *scenario
	mode      Mode
	processed uint64
	next      [4]int // per channel: index of the next record expected
	blocked   uint64 // channel bits
	snapTaken [maxID + 1]bool
	snap      [maxID + 1]uint64
	forwarded [maxID + 1]bool
	fwdAt     [maxID + 1]uint64 // processed when the barrier was forwarded
	chState   [maxID + 1]uint64
	completed [maxID + 1]bool
	aborted   [maxID + 1]bool
	canceled  [maxID + 1]bool // Cancel was called
	ended     int
	inputDone bool
}

func (m *model) apply(as []Action) error {
	for i, a := range as {
		switch a := a.(type) {
		case *Process[int]:
			r := a.Item.Value
			bit := uint64(1) << r
			if m.processed&bit != 0 {
				return fmt.Errorf("record %d processed twice", r)
			}
			c := a.Channel
			if m.next[c] >= len(m.s.recs[c]) || m.s.recs[c][m.next[c]] != r {
				return fmt.Errorf("record %d processed out of channel %d's order", r, c)
			}
			m.next[c]++
			m.processed |= bit
		case Buffered:
			if m.blocked&(1<<a.Channel) == 0 {
				return fmt.Errorf("record buffered on unblocked channel %d", a.Channel)
			}
		case BlockChannel:
			if m.blocked&(1<<a.Channel) != 0 {
				return fmt.Errorf("channel %d blocked twice", a.Channel)
			}
			m.blocked |= 1 << a.Channel
		case UnblockChannel:
			if m.blocked&(1<<a.Channel) == 0 {
				return fmt.Errorf("channel %d unblocked but not blocked", a.Channel)
			}
			m.blocked &^= 1 << a.Channel
		case Snapshot:
			n := a.Checkpoint
			if m.snapTaken[n] {
				return fmt.Errorf("checkpoint %d snapshotted twice", n)
			}
			if want := m.mode.unaligned || a.TimedOut; a.Unaligned != want {
				return fmt.Errorf("checkpoint %d: snapshot unaligned=%v in mode %v", n, a.Unaligned, m.mode)
			}
			m.snapTaken[n], m.snap[n] = true, m.processed
			if m.forwarded[n] && m.fwdAt[n] != m.processed {
				return fmt.Errorf("checkpoint %d: records processed between forwarding the barrier and the snapshot", n)
			}
		case ForwardBarrier:
			n := a.Checkpoint
			if m.forwarded[n] {
				return fmt.Errorf("checkpoint %d: barrier forwarded twice", n)
			}
			m.forwarded[n], m.fwdAt[n] = true, m.processed
			if m.snapTaken[n] && m.snap[n] != m.processed {
				return fmt.Errorf("checkpoint %d: records processed between the snapshot and forwarding the barrier", n)
			}
		case PersistChannelState[int]:
			n, r := a.Checkpoint, a.Item.Value
			if !m.snapTaken[n] {
				return fmt.Errorf("checkpoint %d: channel state before snapshot", n)
			}
			if m.processed&(1<<r) != 0 || m.chState[n]&(1<<r) != 0 {
				return fmt.Errorf("checkpoint %d: record %d persisted after processing or twice", n, r)
			}
			p, ok := nextAction[*Process[int]](as[i+1:])
			if !ok || p.Item.Value != r {
				return fmt.Errorf("checkpoint %d: persisted record %d is not processed next", n, r)
			}
			m.chState[n] |= 1 << r
		case PartComplete:
			n := a.Checkpoint
			if m.completed[n] || m.aborted[n] || !m.snapTaken[n] {
				return fmt.Errorf("checkpoint %d: part complete twice, after abort or without snapshot", n)
			}
			if !m.forwarded[n] || m.canceled[n] {
				return fmt.Errorf("checkpoint %d: part complete but barrier not forwarded, or after cancel", n)
			}
			m.completed[n] = true
			snap, cs, pre := m.snap[n], m.chState[n], m.s.pre[n]
			if snap&cs != 0 {
				return fmt.Errorf("checkpoint %d: records %v both in the snapshot and in channel state", n, ids(snap&cs))
			}
			if snap|cs != pre {
				return fmt.Errorf("checkpoint %d: snapshot %v + channel state %v != records ahead of the barrier %v",
					n, ids(snap), ids(cs), ids(pre))
			}
			if !a.Unaligned && cs != 0 {
				return fmt.Errorf("checkpoint %d: aligned but persisted channel state %v", n, ids(cs))
			}
			if a.PersistedRecords != bits.OnesCount64(cs) {
				return fmt.Errorf("checkpoint %d: PersistedRecords=%d, persisted %d", n, a.PersistedRecords, bits.OnesCount64(cs))
			}
		case AbortCheckpoint:
			n := a.Checkpoint
			switch {
			case m.completed[n] || m.aborted[n]:
				return fmt.Errorf("checkpoint %d: aborted after completion or twice", n)
			case a.Reason == Canceled && !m.canceled[n]:
				return fmt.Errorf("checkpoint %d: canceled without Cancel", n)
			case a.Reason == Subsumed && m.mode == Aligned():
				// Aligned channels deliver barriers in order behind a
				// block, so only a skipped barrier could subsume.
				return fmt.Errorf("checkpoint %d subsumed in aligned mode", n)
			}
			m.aborted[n] = true
		case InputEnded:
			m.inputDone = true
		case AlignmentStarted, StartTimer, CancelTimer:
		default:
			return fmt.Errorf("unexpected action %T", a)
		}
	}
	return nil
}

func nextAction[A Action](as []Action) (A, bool) {
	for _, a := range as {
		if x, ok := a.(A); ok {
			return x, true
		}
	}
	var zero A
	return zero, false
}

func ids(mask uint64) []int {
	var out []int
	for mask != 0 {
		r := bits.TrailingZeros64(mask)
		out = append(out, r)
		mask &^= 1 << r
	}
	return out
}

// check drives one interleaving through d and returns the first violation.
func (s *scenario) check(d driver, mode Mode, order []ev) error {
	m := &model{s: s, mode: mode}
	for _, e := range order {
		var in Input
		switch e.kind {
		case evRecord:
			in = Record[int]{e.ch, Item[int]{Value: e.rec, Records: 1, Bytes: 10}}
		case evBarrier:
			in = Barrier{e.ch, e.id}
		case evEnd:
			m.ended++
			in = EndOfChannel{e.ch}
		case evTimer:
			in = TimerFired{e.id}
		case evCancel:
			m.canceled[e.id] = true
			in = Cancel{e.id}
		}
		as := d.Step(in)
		if err := m.apply(as); err != nil {
			return err
		}
	}
	if m.processed != s.all {
		return fmt.Errorf("records %v never processed", ids(s.all&^m.processed))
	}
	if m.blocked != 0 {
		return fmt.Errorf("channels %v left blocked", ids(m.blocked))
	}
	if m.inputDone != (m.ended == s.chans) {
		return fmt.Errorf("InputEnded=%v with %d of %d channels ended", m.inputDone, m.ended, s.chans)
	}
	for i, n := range s.ids {
		if !m.completed[n] && !m.aborted[n] {
			return fmt.Errorf("checkpoint %d neither completed nor aborted", n)
		}
		if i == len(s.ids)-1 && !m.completed[n] && !m.canceled[n] {
			return fmt.Errorf("newest checkpoint %d did not complete", n)
		}
	}
	return nil
}

// checkAll checks every interleaving and returns how many it checked,
// stopping at the first violation.
func (s *scenario) checkAll(mode Mode, newDriver func(*Handler[int]) driver) (int, error) {
	return s.interleavings(func(order []ev) error {
		h, err := New[int](s.chans, mode)
		if err != nil {
			return err
		}
		if err := s.check(newDriver(h), mode, order); err != nil {
			return fmt.Errorf("%v\n  interleaving %v", err, order)
		}
		return nil
	})
}

func plain(h *Handler[int]) driver { return h }

var scenarios = []struct {
	chans  []string // per channel, then any cancel pseudo-channel
	timers string   // timer pseudo-channel for the timeout mode
	// light replaces chans in the timeout mode under the race detector
	// or -short, where the full scenario would take too long.
	light []string
}{
	{[]string{"r r B1 r", "r r B1 r"}, "T1", nil},
	{[]string{"r B1 r B2 r", "r B1 r B2 r"}, "T1 T2", nil},
	{[]string{"r r B1 r r B2 r", "B1 r B2 r"}, "T1 T2", nil},
	{[]string{"r B1 r", "r B1 r", "r B1 r"}, "T1", nil},
	{[]string{"r B1 r B2", "r B1 r B2", "r B1 r B2"}, "T1", []string{"r B1 r B2", "r B1 r B2", "B1 r B2"}},
	{[]string{"r B1 r B2 r E", "r r E"}, "T1 T2", nil},
	{[]string{"r B1 r E", "r r B1 E", "r E"}, "T1", nil},
	{[]string{"r B1 r B2 r", "r B1 r B2 r", "X1"}, "T1 T2", []string{"r B1 r B2 r", "B1 r B2 r", "X1"}},
	{[]string{"r B1 r", "r B1 r", "r B1 r", "X1"}, "T1", []string{"r B1 r", "r B1 r", "B1 r", "X1"}},
}

// TestEveryInterleavingGivesAConsistentCut is the acceptance criterion.
func TestEveryInterleavingGivesAConsistentCut(t *testing.T) {
	const timeout = time.Second
	modes := []Mode{Aligned(), Unaligned(), AlignedWithTimeout(timeout)}
	total := map[string]int{}
	for _, sc := range scenarios {
		for _, mode := range modes {
			specs := sc.chans
			if mode.timeout > 0 {
				if sc.light != nil && (raceEnabled || testing.Short()) {
					specs = sc.light
				}
				specs = append(specs[:len(specs):len(specs)], sc.timers)
			}
			s := newScenario(specs...)
			n, err := s.checkAll(mode, plain)
			if err != nil {
				t.Fatalf("%v, %s: %v", mode, s.name, err)
			}
			var lens []int
			for _, q := range s.seqs {
				lens = append(lens, len(q))
			}
			if want := multinomial(lens...); n != want {
				t.Fatalf("%v, %s: checked %d interleavings, want %d", mode, s.name, n, want)
			}
			t.Logf("%-22v %-45s %7d interleavings", mode, s.name, n)
			total[mode.String()] += n
		}
	}
	for _, mode := range modes {
		t.Logf("%v: %d interleavings in total", mode, total[mode.String()])
	}
}

// leakyAligned is a broken aligned handler: it does not hold back records
// of channels that already delivered the barrier, it processes them at once.
type leakyAligned struct{ *Handler[int] }

func (l leakyAligned) Step(in Input) []Action {
	if r, ok := in.(Record[int]); ok && l.Blocked(r.Channel) {
		return []Action{&Process[int]{Channel: r.Channel, Item: r.Item}}
	}
	return l.Handler.Step(in)
}

// forgetfulUnaligned is a broken unaligned handler: it never persists
// channel state.
type forgetfulUnaligned struct{ *Handler[int] }

func (f forgetfulUnaligned) Step(in Input) []Action {
	if _, ok := in.(Record[int]); !ok {
		return f.Handler.Step(in)
	}
	var out []Action
	for _, a := range f.Handler.Step(in) {
		if _, ok := a.(PersistChannelState[int]); !ok {
			out = append(out, a)
		}
	}
	return out
}

// persistHeld is a broken timeout switch: on the timer it persists the
// records it held back from blocked channels as channel state. Those
// records follow the barrier on their channels, so this puts post-barrier
// records into the checkpoint (they would be applied twice after a restore).
type persistHeld struct{ *Handler[int] }

func (p persistHeld) Step(in Input) []Action {
	tf, ok := in.(TimerFired)
	if !ok {
		return p.Handler.Step(in)
	}
	var out []Action
	for _, a := range p.Handler.Step(in) {
		if pr, ok := a.(*Process[int]); ok && pr.Replayed {
			out = append(out, PersistChannelState[int]{Checkpoint: tf.Checkpoint, Channel: pr.Channel, Item: pr.Item})
		}
		out = append(out, a)
	}
	return out
}

// TestCheckerCatchesBrokenHandlers proves the exhaustive check has teeth:
// each deliberately broken handler must be caught.
func TestCheckerCatchesBrokenHandlers(t *testing.T) {
	tests := []struct {
		name   string
		mode   Mode
		specs  []string
		broken func(*Handler[int]) driver
		want   string
	}{
		{"aligned without blocking", Aligned(), []string{"r r B1 r", "r r B1 r"},
			func(h *Handler[int]) driver { return leakyAligned{h} }, "records ahead of the barrier"},
		{"unaligned without channel state", Unaligned(), []string{"r B1 r", "r B1 r", "r B1 r"},
			func(h *Handler[int]) driver { return forgetfulUnaligned{h} }, "records ahead of the barrier"},
		{"timeout switch persisting held records", AlignedWithTimeout(time.Second), []string{"r B1 r", "r B1 r", "T1"},
			func(h *Handler[int]) driver { return persistHeld{h} }, "records ahead of the barrier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScenario(tt.specs...)
			// The correct handler passes the same scenario...
			if _, err := s.checkAll(tt.mode, plain); err != nil {
				t.Fatalf("correct handler: %v", err)
			}
			// ...and the broken one is caught.
			_, err := s.checkAll(tt.mode, tt.broken)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("broken handler not caught: %v", err)
			}
			t.Logf("caught: %v", err)
		})
	}
}
