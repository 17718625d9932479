package barrier

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// show renders actions compactly: p0:7 processes value 7 of channel 0 (a
// trailing * marks a replayed record), buf0 buffers on channel 0, and so on.
func show(as []Action) string {
	var out []string
	for _, a := range as {
		var s string
		switch a := a.(type) {
		case *Process[int]:
			s = fmt.Sprintf("p%d:%d", a.Channel, a.Item.Value)
			if a.Replayed {
				s += "*"
			}
		case Buffered:
			s = fmt.Sprintf("buf%d", a.Channel)
		case BlockChannel:
			s = fmt.Sprintf("block%d", a.Channel)
		case UnblockChannel:
			s = fmt.Sprintf("unblock%d", a.Channel)
		case AlignmentStarted:
			s = fmt.Sprintf("start%d@%d", a.Checkpoint, a.FirstChannel)
		case Snapshot:
			s = fmt.Sprintf("snap%d", a.Checkpoint)
			if a.Unaligned {
				s += ",u"
			}
			if a.TimedOut {
				s += ",timeout"
			}
		case ForwardBarrier:
			s = fmt.Sprintf("fwd%d", a.Checkpoint)
			if a.Overtaking {
				s += ",overtake"
			}
		case PersistChannelState[int]:
			s = fmt.Sprintf("persist%d:%d:%d", a.Checkpoint, a.Channel, a.Item.Value)
		case StartTimer:
			s = fmt.Sprintf("timer%d", a.Checkpoint)
		case CancelTimer:
			s = fmt.Sprintf("untimer%d", a.Checkpoint)
		case PartComplete:
			s = fmt.Sprintf("done%d", a.Checkpoint)
		case AbortCheckpoint:
			s = fmt.Sprintf("abort%d,%v", a.Checkpoint, a.Reason)
		case InputEnded:
			s = "ended"
		default:
			s = fmt.Sprintf("%T", a)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// feed applies one input written as: r<c>:<v> record, b<c>:<id> barrier,
// e<c> end, t<id> timer fired, x<id> cancel.
func feed(h *Handler[int], in string) []Action {
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			panic(in)
		}
		return n
	}
	c, v, _ := strings.Cut(in[1:], ":")
	switch in[0] {
	case 'r':
		return h.Step(Record[int]{Channel(num(c)), Item[int]{Value: num(v), Records: 1, Bytes: 100}})
	case 'b':
		return h.Step(Barrier{Channel(num(c)), checkpoint.ID(num(v))})
	case 'e':
		return h.Step(EndOfChannel{Channel(num(c))})
	case 't':
		return h.Step(TimerFired{checkpoint.ID(num(c))})
	case 'x':
		return h.Step(Cancel{checkpoint.ID(num(c))})
	}
	panic(in)
}

type io struct{ in, want string }

func TestHandlerSequences(t *testing.T) {
	timeout := AlignedWithTimeout(5 * time.Second)
	tests := []struct {
		name     string
		channels int
		mode     Mode
		steps    []io
	}{
		{"aligned", 2, Aligned(), []io{
			{"r0:1", "p0:1"},
			{"b0:1", "start1@0 block0"},
			{"r0:2", "buf0"},
			{"r1:3", "p1:3"},
			{"r0:4", "buf0"},
			{"b1:1", "snap1 fwd1 done1 unblock0 p0:2* p0:4*"},
			{"r0:5", "p0:5"},
			{"b1:1", ""}, // duplicate: stale
		}},
		{"aligned, one channel needs no alignment", 1, Aligned(), []io{
			{"r0:1", "p0:1"},
			{"b0:1", "start1@0 snap1 fwd1 done1"},
			{"r0:2", "p0:2"},
		}},
		{"unaligned", 2, Unaligned(), []io{
			{"r0:1", "p0:1"},
			{"b0:1", "start1@0 fwd1,overtake snap1,u"},
			{"r0:2", "p0:2"},
			{"r1:3", "persist1:1:3 p1:3"},
			{"b1:1", "done1"},
			{"r1:4", "p1:4"},
		}},
		{"timeout switch", 2, timeout, []io{
			{"b0:1", "start1@0 block0 timer1"},
			{"r0:2", "buf0"},
			{"r1:3", "p1:3"},
			{"t1", "fwd1,overtake snap1,u,timeout unblock0 p0:2*"},
			{"r0:4", "p0:4"},
			{"r1:5", "persist1:1:5 p1:5"},
			{"b1:1", "done1"},
			{"t1", ""}, // late timer
		}},
		{"timeout not reached", 2, timeout, []io{
			{"t1", ""},
			{"b0:1", "start1@0 block0 timer1"},
			{"b1:1", "snap1 fwd1 untimer1 done1 unblock0"},
			{"t1", ""},
		}},
		{"aligned: newer barrier on an unblocked channel subsumes", 2, Aligned(), []io{
			{"b0:1", "start1@0 block0"},
			{"r0:2", "buf0"},
			{"b0:2", ""}, // held behind r0:2
			{"r0:3", "buf0"},
			{"b1:2", "abort1,subsumed unblock0 p0:2* start2@0 block0 buf0 snap2 fwd2 done2 unblock0 p0:3*"},
			{"b1:1", ""},
			{"r1:4", "p1:4"},
		}},
		{"aligned: next barrier held on a blocked channel is replayed", 2, Aligned(), []io{
			{"b0:1", "start1@0 block0"},
			{"r0:2", "buf0"},
			{"b0:2", ""},
			{"r0:3", "buf0"},
			{"r1:4", "p1:4"},
			{"b1:1", "snap1 fwd1 done1 unblock0 p0:2* start2@0 block0 buf0"},
			{"r1:5", "p1:5"},
			{"b1:2", "snap2 fwd2 done2 unblock0 p0:3*"},
		}},
		{"unaligned: newer barrier subsumes", 2, Unaligned(), []io{
			{"b0:1", "start1@0 fwd1,overtake snap1,u"},
			{"r1:1", "persist1:1:1 p1:1"},
			{"b0:2", "abort1,subsumed start2@0 fwd2,overtake snap2,u"},
			{"r1:2", "persist2:1:2 p1:2"},
			{"b1:1", ""},
			{"r1:3", "persist2:1:3 p1:3"},
			{"b1:2", "done2"},
		}},
		{"timeout switch then subsumed", 2, timeout, []io{
			{"b0:1", "start1@0 block0 timer1"},
			{"b0:2", ""},
			{"t1", "fwd1,overtake snap1,u,timeout unblock0 abort1,subsumed start2@0 block0 timer2"},
			{"b1:2", "snap2 fwd2 untimer2 done2 unblock0"},
		}},
		{"ended channel counts as delivered", 3, Aligned(), []io{
			{"e2", ""},
			{"b0:1", "start1@0 block0"},
			{"b1:1", "snap1 fwd1 done1 unblock0"},
			{"e0", ""},
			{"e1", "ended"},
		}},
		{"end during alignment completes it", 2, Aligned(), []io{
			{"b0:1", "start1@0 block0"},
			{"r1:1", "p1:1"},
			{"e1", "snap1 fwd1 done1 unblock0"},
			{"b0:2", "start2@0 snap2 fwd2 done2"},
		}},
		{"end on a blocked channel waits its turn", 2, Aligned(), []io{
			{"b0:1", "start1@0 block0"},
			{"r0:1", "buf0"},
			{"e0", ""},
			{"b1:1", "snap1 fwd1 done1 unblock0 p0:1*"},
			{"e1", "ended"},
		}},
		{"unaligned: end completes channel state", 2, Unaligned(), []io{
			{"b0:1", "start1@0 fwd1,overtake snap1,u"},
			{"r1:1", "persist1:1:1 p1:1"},
			{"e1", "done1"},
			{"e0", "ended"},
		}},
		{"cancel pending aligned", 2, timeout, []io{
			{"b0:1", "start1@0 block0 timer1"},
			{"r0:2", "buf0"},
			{"x1", "abort1,canceled untimer1 unblock0 p0:2*"},
			{"b1:1", ""},
			{"t1", ""},
			{"x1", ""},
		}},
		{"cancel newer than pending aborts both", 2, Aligned(), []io{
			{"b0:1", "start1@0 block0"},
			{"x0", ""},
			{"x2", "abort1,canceled unblock0 abort2,canceled"},
			{"b1:1", ""},
			{"b1:2", ""},
			{"b1:3", "start3@1 block1"},
		}},
		{"cancel ahead of its barriers", 2, Unaligned(), []io{
			{"x3", "abort3,canceled"},
			{"b0:3", ""},
			{"b0:2", ""},
			{"b0:4", "start4@0 fwd4,overtake snap4,u"},
			{"x4", "abort4,canceled"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New[int](tt.channels, tt.mode)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				if got := show(feed(h, s.in)); got != s.want {
					t.Fatalf("step %d %s:\n got %q\nwant %q", i, s.in, got, s.want)
				}
			}
			if h.Queued() != 0 {
				t.Errorf("%d events still queued", h.Queued())
			}
		})
	}
}

func TestHandlerMetrics(t *testing.T) {
	h, _ := New[int](3, AlignedWithTimeout(time.Second))
	h.Step(Barrier{1, 7})
	h.Step(Record[int]{1, Item[int]{Value: 1, Records: 10, Bytes: 1000}})
	h.Step(Record[int]{1, Item[int]{Value: 2, Records: 5, Bytes: 500}})
	h.Step(Barrier{0, 7})
	h.Step(Record[int]{0, Item[int]{Value: 3, Records: 1, Bytes: 1}})
	h.Step(TimerFired{7})
	h.Step(Record[int]{2, Item[int]{Value: 4, Records: 3, Bytes: 30}})
	as := h.Step(Barrier{2, 7})
	got, ok := nextAction[PartComplete](as)
	want := PartComplete{Checkpoint: 7, FirstChannel: 1, Unaligned: true, TimedOut: true,
		BufferedRecords: 16, BufferedBytes: 1501, PersistedRecords: 3, PersistedBytes: 30}
	if !ok || got != want {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestHandlerAccessors(t *testing.T) {
	h, _ := New[int](2, Aligned())
	if _, ok := h.Pending(); ok || h.State() != "waiting for first barrier" || h.Mode() != Aligned() {
		t.Fatal("fresh handler")
	}
	h.Step(Barrier{1, 3})
	h.Step(Record[int]{1, Item[int]{}})
	if id, ok := h.Pending(); !ok || id != 3 || !h.Blocked(1) || h.Blocked(0) || h.Queued() != 1 || h.State() != "collecting aligned" {
		t.Fatalf("aligning: pending %d %v blocked %v %v queued %d state %q", id, ok, h.Blocked(0), h.Blocked(1), h.Queued(), h.State())
	}
	u, _ := New[int](2, Unaligned())
	u.Step(Barrier{0, 1})
	if u.State() != "collecting unaligned" || u.Blocked(0) {
		t.Fatalf("unaligned state %q", u.State())
	}
}

func TestHandlerResultReusedAcrossCalls(t *testing.T) {
	h, _ := New[int](1, Aligned())
	first := h.Step(Record[int]{0, Item[int]{Value: 1}})
	if show(first) != "p0:1" {
		t.Fatal(show(first))
	}
	second := h.Step(Record[int]{0, Item[int]{Value: 2}})
	if show(second) != "p0:2" {
		t.Fatal(show(second))
	}
}

// TestHandlerMisuseFails: input that only a buggy loop sends comes out as
// a Fail action naming the input, and leaves the handler as it was.
func TestHandlerMisuseFails(t *testing.T) {
	for name, tt := range map[string]struct {
		before []Input
		in     Input
		want   string
	}{
		"channel out of range": {nil, Record[int]{2, Item[int]{}}, "record on channel 2 of 2"},
		"negative channel":     {nil, Barrier{-1, 1}, "barrier on channel -1 of 2"},
		"record after end":     {[]Input{EndOfChannel{0}}, Record[int]{0, Item[int]{}}, "record on channel 0 after its end"},
		"end twice":            {[]Input{EndOfChannel{1}}, EndOfChannel{1}, "end on channel 1 after its end"},
		"another item type":    {nil, Record[string]{0, Item[string]{}}, "does not take"},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := New[int](2, Aligned())
			for _, in := range tt.before {
				h.Step(in)
			}
			state, queued := h.State(), h.Queued()
			as := h.Step(tt.in)
			f, ok := nextAction[Fail](as)
			if len(as) != 1 || !ok || !strings.Contains(f.Err.Error(), tt.want) || !strings.Contains(f.Err.Error(), state) {
				t.Fatalf("got %s, want one Fail containing %q and %q", show(as), tt.want, state)
			}
			if h.State() != state || h.Queued() != queued {
				t.Errorf("state %q queued %d after Fail, was %q %d", h.State(), h.Queued(), state, queued)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	if _, err := New[int](0, Aligned()); err == nil {
		t.Error("zero channels accepted")
	}
	if _, err := New[int](1, AlignedWithTimeout(-time.Second)); err == nil {
		t.Error("negative timeout accepted")
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration
		want    Mode
		str     string
		err     bool
	}{
		{"aligned", 0, Aligned(), "aligned", false},
		{"unaligned", 0, Unaligned(), "unaligned", false},
		{"aligned", 3 * time.Second, AlignedWithTimeout(3 * time.Second), "aligned(timeout=3s)", false},
		{"unaligned", time.Second, Mode{}, "", true},
		{"aligned", -time.Second, Mode{}, "", true},
		{"sideways", 0, Mode{}, "", true},
	}
	for _, tt := range tests {
		m, err := ParseMode(tt.name, tt.timeout)
		if (err != nil) != tt.err || m != tt.want || (!tt.err && m.String() != tt.str) {
			t.Errorf("ParseMode(%q, %v) = %v, %v", tt.name, tt.timeout, m, err)
		}
	}
	if !Unaligned().IsUnaligned() || AlignedWithTimeout(time.Second).AlignmentTimeout() != time.Second {
		t.Error("accessors")
	}
}

// TestRecordPathDoesNotAllocate holds the hot path to what BenchmarkRecord
// measures: a record on an unblocked channel, in and out of Step, costs no
// allocation (neither the Record input nor the Process action escapes).
func TestRecordPathDoesNotAllocate(t *testing.T) {
	h, _ := New[int](2, Aligned())
	it := Item[int]{Value: 1, Records: 1, Bytes: 8}
	h.Step(Record[int]{0, it}) // grow the buffers once
	if n := testing.AllocsPerRun(1000, func() { h.Step(Record[int]{0, it}) }); n != 0 {
		t.Errorf("%v allocations per record", n)
	}
}

// BenchmarkRecord measures the hot path: a record on an unblocked channel.
func BenchmarkRecord(b *testing.B) {
	h, _ := New[int](2, Aligned())
	it := Item[int]{Value: 1, Records: 1, Bytes: 8}
	b.ReportAllocs()
	for b.Loop() {
		h.Step(Record[int]{0, it})
	}
}
