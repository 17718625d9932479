package checkpoint

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// render turns actions into short strings so that tables stay readable.
func render(as []Action) []string {
	out := []string{}
	for _, a := range as {
		switch a := a.(type) {
		case InjectBarrier:
			out = append(out, fmt.Sprintf("inject(%d)", a.ID))
		case ScheduleTimeout:
			out = append(out, fmt.Sprintf("timer(%d,%v)", a.ID, a.After))
		case WriteMetadata:
			var ts []string
			for _, p := range a.Parts {
				ts = append(ts, string(p.Task))
			}
			out = append(out, fmt.Sprintf("metadata(%d:%s)", a.ID, strings.Join(ts, ",")))
		case NotifyComplete:
			out = append(out, fmt.Sprintf("complete(%d)", a.ID))
		case Abort:
			s := fmt.Sprintf("abort(%d,%v", a.ID, a.Reason)
			if a.Task != "" {
				s += "," + string(a.Task)
			}
			out = append(out, s+")")
		case DiscardParts:
			out = append(out, fmt.Sprintf("discard(%d)", a.ID))
		case DeleteOld:
			out = append(out, fmt.Sprintf("delete%v", a.IDs))
		case TriggerSkipped:
			out = append(out, fmt.Sprintf("skipped%v", a.Pending))
		default:
			out = append(out, fmt.Sprintf("%T", a))
		}
	}
	return out
}

type step struct {
	do   func(c *Coordinator) []Action
	want string // rendered actions joined by " "
}

func trig(sec int) func(*Coordinator) []Action {
	return func(c *Coordinator) []Action { return c.Step(Trigger{at(sec)}) }
}

func ack(sec int, id ID, task TaskID, durable bool) func(*Coordinator) []Action {
	return func(c *Coordinator) []Action {
		return c.Step(Ack{at(sec), id, task, Part{Key: fmt.Sprintf("%d/%s", id, task), StateBytes: 100, InFlightBytes: 10, InFlightRecords: 1, Durable: durable}})
	}
}

func mdone(sec int, id ID) func(*Coordinator) []Action {
	return func(c *Coordinator) []Action { return c.Step(MetadataWritten{at(sec), id}) }
}

func tmo(sec int, id ID) func(*Coordinator) []Action {
	return func(c *Coordinator) []Action { return c.Step(Timeout{at(sec), id}) }
}

// complete runs a whole successful checkpoint for tasks a and b.
func complete(id ID) []step {
	return []step{
		{trig(int(id) * 10), fmt.Sprintf("inject(%d) timer(%d,10m0s)", id, id)},
		{ack(int(id)*10+1, id, "a", true), ""},
		{ack(int(id)*10+2, id, "b", true), fmt.Sprintf("metadata(%d:a,b)", id)},
		{mdone(int(id)*10+3, id), fmt.Sprintf("complete(%d)", id)},
	}
}

func TestCoordinatorSequences(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		steps []step
		want  Counts
	}{
		{
			name:  "happy path",
			steps: complete(1),
			want:  Counts{Triggered: 1, Completed: 1},
		},
		{
			name: "metadata only after every task acked with a durable part",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", true), ""},
				{ack(2, 1, "b", false), ""},               // acked, upload still running
				{mdone(3, 1), ""},                         // nothing was asked for: ignored
				{ack(4, 1, "b", true), "metadata(1:a,b)"}, // now durable
				{ack(5, 1, "b", true), ""},                // duplicate
				{tmo(6, 1), ""},                           // metadata may land: not aborted
				{mdone(7, 1), "complete(1)"},              //
				{ack(8, 1, "a", true), ""},                // late
				{func(c *Coordinator) []Action { return c.Step(Decline{at(9), 1, "a", "x"}) }, ""}, // late
			},
			want: Counts{Triggered: 1, Completed: 1},
		},
		{
			name: "PartsWritten confirms parts acked non-durable",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", false), ""},
				{func(c *Coordinator) []Action { return c.Step(PartsWritten{at(2), 1}) }, ""}, // b not acked yet
				{ack(3, 1, "b", false), ""},
				{func(c *Coordinator) []Action { return c.Step(PartsWritten{at(4), 1}) }, "metadata(1:a,b)"},
				{mdone(5, 1), "complete(1)"},
			},
			want: Counts{Triggered: 1, Completed: 1},
		},
		{
			name: "decline aborts and discards; late ack ignored; next id increases",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", true), ""},
				{func(c *Coordinator) []Action { return c.Step(Decline{at(2), 1, "b", "disk full"}) }, "abort(1,declined,b) discard(1)"},
				{ack(3, 1, "b", true), ""},
				{tmo(4, 1), ""},
				{trig(5), "inject(2) timer(2,10m0s)"},
			},
			want: Counts{Triggered: 2, Failed: 1},
		},
		{
			name: "timeout aborts; late ack and stale timeout ignored",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", true), ""},
				{tmo(600, 1), "abort(1,timed out) discard(1)"},
				{ack(601, 1, "b", true), ""},
				{tmo(602, 1), ""},
				{tmo(603, 7), ""},
			},
			want: Counts{Triggered: 1, Failed: 1},
		},
		{
			name: "skip while pending",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{trig(1), "skipped[1]"},
				{ack(2, 1, "a", true), ""},
				{ack(3, 1, "b", true), "metadata(1:a,b)"},
				{trig(4), "skipped[1]"}, // writing metadata still counts as pending
				{mdone(5, 1), "complete(1)"},
				{trig(6), "inject(2) timer(2,10m0s)"},
			},
			want: Counts{Triggered: 2, Completed: 1, Skipped: 2},
		},
		{
			name:  "retention keeps the newest two",
			steps: slices.Concat(complete(1), complete(2), complete(3)[:3], []step{{mdone(33, 3), "complete(3) delete[1]"}}),
			want:  Counts{Triggered: 3, Completed: 3},
		},
		{
			name: "retention counts checkpoints found at restore",
			cfg:  Config{Retained: 1, Completed: []ID{4, 2}},
			steps: []step{
				{trig(0), "inject(5) timer(5,10m0s)"},
				{ack(1, 5, "a", true), ""},
				{ack(2, 5, "b", true), "metadata(5:a,b)"},
				{mdone(3, 5), "complete(5) delete[2 4]"},
			},
			want: Counts{Triggered: 1, Completed: 1},
		},
		{
			name: "task failure aborts collecting checkpoints only",
			cfg:  Config{MaxConcurrent: 2},
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", true), ""},
				{ack(2, 1, "b", true), "metadata(1:a,b)"},
				{trig(3), "inject(2) timer(2,10m0s)"},
				{func(c *Coordinator) []Action { return c.Step(TaskFailed{at(4), "b"}) }, "abort(2,task failed,b) discard(2)"},
				{func(c *Coordinator) []Action { return c.Step(TaskFailed{at(4), "zz"}) }, ""},
				{mdone(5, 1), "complete(1)"},
			},
			want: Counts{Triggered: 2, Completed: 1, Failed: 1},
		},
		{
			name: "metadata failure abandons",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{ack(1, 1, "a", true), ""},
				{ack(2, 1, "b", true), "metadata(1:a,b)"},
				{func(c *Coordinator) []Action { return c.Step(MetadataFailed{at(3), 1, errors.New("503")}) }, "abort(1,metadata write failed) discard(1)"},
				{mdone(4, 1), ""},
			},
			want: Counts{Triggered: 1, Failed: 1},
		},
		{
			name: "newer completion subsumes older collecting one",
			cfg:  Config{MaxConcurrent: 2},
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{trig(1), "inject(2) timer(2,10m0s)"},
				{trig(2), "skipped[1 2]"},
				{ack(3, 1, "a", true), ""},
				{ack(4, 2, "a", true), ""},
				{ack(5, 2, "b", true), "metadata(2:a,b)"},
				{mdone(6, 2), "abort(1,subsumed) discard(1) complete(2)"},
				{ack(7, 1, "b", true), ""},
			},
			want: Counts{Triggered: 2, Completed: 1, Aborted: 1, Skipped: 1},
		},
		{
			name: "older metadata landing after a newer completion is subsumed",
			cfg:  Config{MaxConcurrent: 2},
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{trig(1), "inject(2) timer(2,10m0s)"},
				{ack(2, 1, "a", true), ""},
				{ack(3, 1, "b", true), "metadata(1:a,b)"},
				{ack(4, 2, "a", true), ""},
				{ack(5, 2, "b", true), "metadata(2:a,b)"},
				{mdone(6, 2), "complete(2)"},
				{mdone(7, 1), "abort(1,subsumed) discard(1)"},
			},
			want: Counts{Triggered: 2, Completed: 1, Aborted: 1},
		},
		{
			name: "stop",
			steps: []step{
				{trig(0), "inject(1) timer(1,10m0s)"},
				{func(c *Coordinator) []Action { return c.Step(Stop{at(1)}) }, "abort(1,stopped) discard(1)"},
				{trig(2), ""},
			},
			want: Counts{Triggered: 1, Aborted: 1},
		},
		{
			name: "unknown task and future ids ignored",
			steps: []step{
				{ack(0, 1, "a", true), ""},
				{trig(1), "inject(1) timer(1,10m0s)"},
				{ack(2, 1, "zz", true), ""},
				{ack(3, 2, "a", true), ""},
				{func(c *Coordinator) []Action { return c.Step(Decline{at(4), 1, "zz", ""}) }, ""},
			},
			want: Counts{Triggered: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Tasks = []TaskID{"a", "b"}
			c, err := NewCoordinator(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tt.steps {
				got := strings.Join(render(s.do(c)), " ")
				if got != s.want {
					t.Fatalf("step %d: got %q, want %q", i, got, s.want)
				}
			}
			if got := c.Counts(); got != tt.want {
				t.Errorf("counts = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCoordinatorStats(t *testing.T) {
	c, err := NewCoordinator(Config{Tasks: []TaskID{"src/0", "agg/0", "sink/0"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Step(Trigger{at(100)})
	c.Step(Ack{at(101), 1, "sink/0", Part{StateBytes: 1, Durable: true}})
	c.Step(Ack{at(102), 1, "src/0", Part{StateBytes: 8, Durable: true}})
	c.Step(Ack{at(103), 1, "agg/0", Part{StateBytes: 500, InFlightBytes: 64, InFlightRecords: 2}})
	st, ok := c.Stats(1)
	if !ok || st.Status != Collecting || len(st.Acks) != 3 || st.InFlightBytes != 64 {
		t.Fatalf("pending stats = %+v, %v", st, ok)
	}
	c.Step(Ack{at(105), 1, "agg/0", Part{StateBytes: 500, InFlightBytes: 64, InFlightRecords: 2, Durable: true}})
	as := c.Step(MetadataWritten{at(107), 1})
	nc, ok := as[0].(NotifyComplete)
	if !ok {
		t.Fatalf("got %v", render(as))
	}
	st = nc.Stats
	if st.Triggered != at(100) || st.AllDurable != at(105) || st.Finished != at(107) || st.Duration() != 7*time.Second {
		t.Errorf("times: %+v", st)
	}
	if st.StateBytes != 509 || st.InFlightBytes != 64 || st.InFlightRecords != 2 {
		t.Errorf("sizes: %+v", st)
	}
	// Acks in Config.Tasks order, with first-ack and durable times.
	want := []TaskAck{
		{Task: "src/0", Acked: at(102), Durable: at(102), Part: Part{StateBytes: 8, Durable: true}},
		{Task: "agg/0", Acked: at(103), Durable: at(105), Part: Part{StateBytes: 500, InFlightBytes: 64, InFlightRecords: 2, Durable: true}},
		{Task: "sink/0", Acked: at(101), Durable: at(101), Part: Part{StateBytes: 1, Durable: true}},
	}
	if !slices.Equal(st.Acks, want) {
		t.Errorf("acks = %+v\nwant  %+v", st.Acks, want)
	}
	// The action's copy does not alias the history.
	nc.Stats.Acks[0].Task = "mutated"
	if again, _ := c.Stats(1); again.Acks[0].Task != "src/0" || again.Status != Completed {
		t.Errorf("history changed through the action: %+v", again)
	}
	if _, ok := c.Stats(99); ok {
		t.Error("stats for an unknown id")
	}
	if id, ok := c.Latest(); !ok || id != 1 {
		t.Errorf("latest = %d, %v", id, ok)
	}
}

func TestCoordinatorHistoryBounded(t *testing.T) {
	c, _ := NewCoordinator(Config{Tasks: []TaskID{"a"}, History: 2})
	for i := range 4 {
		c.Step(Trigger{at(i)})
		c.Step(Timeout{at(i), ID(i + 1)})
	}
	if _, ok := c.Stats(2); ok {
		t.Error("checkpoint 2 should have left the history")
	}
	if st, ok := c.Stats(4); !ok || st.Status != Failed || st.Reason != TimedOut {
		t.Errorf("stats(4) = %+v, %v", st, ok)
	}
}

func TestNewCoordinatorValidates(t *testing.T) {
	bad := []Config{
		{},
		{Tasks: []TaskID{"a", "a"}},
		{Tasks: []TaskID{""}},
		{Tasks: []TaskID{"a"}, Retained: -1},
		{Tasks: []TaskID{"a"}, MaxConcurrent: -1},
		{Tasks: []TaskID{"a"}, Timeout: -time.Second},
		{Tasks: []TaskID{"a"}, NextID: 3, Completed: []ID{3}},
	}
	for _, cfg := range bad {
		if _, err := NewCoordinator(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	c, err := NewCoordinator(Config{Tasks: []TaskID{"a"}, Completed: []ID{7, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if as := render(c.Step(Trigger{t0})); as[0] != "inject(8)" {
		t.Errorf("first id after completed 7: %v", as)
	}
}

// TestCoordinatorRandomInputs drives the coordinator with seeded random
// inputs and checks the protocol's invariants against a model after every
// step.
func TestCoordinatorRandomInputs(t *testing.T) {
	tasks := []TaskID{"a", "b", "c"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 1))
		maxc := 1 + r.IntN(2)
		c, err := NewCoordinator(Config{Tasks: tasks, MaxConcurrent: maxc, Retained: 2})
		if err != nil {
			t.Fatal(err)
		}
		var (
			lastID   ID
			durable  = map[ID]map[TaskID]bool{}
			meta     = map[ID]bool{} // WriteMetadata issued
			ended    = map[ID]bool{}
			complete []ID
			deleted  = map[ID]bool{}
		)
		for i := range 300 {
			now := at(i)
			id := ID(1 + r.IntN(int(lastID)+1))
			task := tasks[r.IntN(len(tasks))]
			var as []Action
			switch k := r.IntN(10); {
			case k < 2:
				as = c.Step(Trigger{now})
			case k < 6:
				d := r.IntN(4) > 0
				if d && !ended[id] && !meta[id] && id <= lastID {
					if durable[id] == nil {
						durable[id] = map[TaskID]bool{}
					}
					durable[id][task] = true
				}
				as = c.Step(Ack{now, id, task, Part{Durable: d}})
			case k < 7:
				as = c.Step(MetadataWritten{now, id})
			case k < 8:
				as = c.Step(Timeout{now, id})
			case k < 9:
				as = c.Step(Decline{now, id, task, ""})
			default:
				if r.IntN(4) == 0 {
					as = c.Step(TaskFailed{now, task})
				} else {
					as = c.Step(MetadataFailed{now, id, nil})
				}
			}
			for j, a := range as {
				switch a := a.(type) {
				case InjectBarrier:
					if a.ID != lastID+1 {
						t.Fatalf("seed %d: inject %d after %d", seed, a.ID, lastID)
					}
					lastID = a.ID
				case WriteMetadata:
					if len(durable[a.ID]) != len(tasks) {
						t.Fatalf("seed %d: metadata for %d with durable parts from %v", seed, a.ID, durable[a.ID])
					}
					meta[a.ID] = true
				case NotifyComplete:
					if !meta[a.ID] || ended[a.ID] {
						t.Fatalf("seed %d: complete %d without metadata or twice", seed, a.ID)
					}
					if n := len(complete); n > 0 && complete[n-1] >= a.ID {
						t.Fatalf("seed %d: completed ids not increasing: %v then %d", seed, complete, a.ID)
					}
					ended[a.ID] = true
					complete = append(complete, a.ID)
				case Abort:
					if ended[a.ID] {
						t.Fatalf("seed %d: abort of finished %d", seed, a.ID)
					}
					ended[a.ID] = true
					if d, ok := as[j+1].(DiscardParts); !ok || d.ID != a.ID {
						t.Fatalf("seed %d: abort not followed by discard: %v", seed, render(as))
					}
				case DeleteOld:
					for _, id := range a.IDs {
						deleted[id] = true
					}
				}
			}
			kept := 0
			for _, id := range complete {
				if !deleted[id] {
					kept++
				}
			}
			if kept > 2 || (len(complete) > 0 && deleted[complete[len(complete)-1]]) {
				t.Fatalf("seed %d: retention broken: complete %v deleted %v", seed, complete, deleted)
			}
			n := c.Counts()
			if n.Triggered != n.Completed+n.Failed+n.Aborted+len(c.Pending()) || len(c.Pending()) > maxc {
				t.Fatalf("seed %d: counts %+v pending %v", seed, n, c.Pending())
			}
		}
	}
}
