package recordwise

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// testWorkerEnv makes this test binary serve as a recordwise worker
// process (TestMain).
const testWorkerEnv = "REWIND_RECORDWISE_TEST_WORKER"

func testWorkerCommand() *run.WorkerCommand { return runtest.WorkerCommand(testWorkerEnv) }

// preparedEnv is a prepared run of sc with this test binary as its worker
// command, closed (and its allocator checked) when the test ends.
func preparedEnv(t *testing.T, sc *scenario) (*run.Env, *options, *plan) {
	t.Helper()
	cfg := sc.config(t)
	env := runtest.PrepareWithWorkers(t, cfg, testWorkerEnv)
	opts, err := sc.opts.resolve(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := buildPlan(env.Job, cfg.Parallelism)
	if err != nil {
		t.Fatal(err)
	}
	return env, opts, pl
}

// TestPlacement: with as many workers as the parallelism, worker w runs
// subtask w of every chain, and only the links between different
// subtasks cross processes; with one worker nothing crosses.
func TestPlacement(t *testing.T) {
	env, _, pl := preparedEnv(t, &scenario{job: "join", inputs: inputs("join", 200, 0, 1), parallelism: 3})
	_ = env
	all := pl.links()
	cross := pl.crossing(3)
	if len(cross) == 0 || len(cross) >= len(all) {
		t.Fatalf("%d of %d links cross 3 workers; want some, not all", len(cross), len(all))
	}
	for i, l := range all {
		if l.id != uint32(i+1) {
			t.Fatalf("link %d has id %d", i, l.id)
		}
		if (l.fromSub != l.toSub) != (workerOf(l.fromSub, 3) != workerOf(l.toSub, 3)) {
			t.Fatalf("link %s: crossing is wrong", l.name())
		}
	}
	if n := len(pl.crossing(1)); n != 0 {
		t.Fatalf("%d links cross one worker", n)
	}
	for w := range 3 {
		for _, line := range pl.placementOf(w, 3) {
			if strings.HasPrefix(line, "task ") && !strings.HasSuffix(line, "-"+strconv.Itoa(w)) {
				t.Fatalf("worker %d runs %s", w, line)
			}
		}
	}
	if err := pl.checkWorkers(4); err == nil {
		t.Fatal("4 workers for parallelism 3 accepted")
	}
}

// TestWorkerProcessesStartFromTheirWelcomeAlone: each worker process of a
// recordwise run joins, opens the inputs and storage its Welcome names,
// finds the coordinator's placement and partition split, and says ready;
// asked for what it does not know it says so; a kill and a replacement are measured; none outlives the fleet.
func TestWorkerProcessesStartFromTheirWelcomeAlone(t *testing.T) {
	for _, jobName := range []string{"keyed-count", "join"} {
		t.Run(jobName, func(t *testing.T) {
			env, opts, pl := preparedEnv(t, &scenario{job: jobName, inputs: inputs(jobName, 2000, 0, 1), parallelism: 2})
			f, err := startWorkerProcesses(context.Background(), env, opts, pl, "r1", 2)
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			defer func() {
				if !closed {
					f.Close()
				}
			}()
			for id := range 2 {
				s := f.Slot(id)
				if s == nil || s.Acquire <= 0 {
					t.Fatalf("worker %d: not ready, or its acquire unmeasured", id)
				}
				if err := s.Conn.SendControl([]byte(`{"op":"tasks"}`)); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				b, err := s.Conn.Control(ctx)
				cancel()
				var m procMsg
				if err != nil || json.Unmarshal(b, &m) != nil || m.Op != opError || !strings.Contains(m.Text, "unknown request") {
					t.Fatalf("worker %d answered an unknown request with %s (%v), want a refusal", id, b, err)
				}
			}
			runtest.KillReplaceAndClose(t, f, 1)
			closed = true
		})
	}
}

// TestWorkerProcessWithOtherPlacementRefusesToStart: a worker told to run
// other tasks, or to read other partitions, than its own plan gives it
// says why, and the start fails with it.
func TestWorkerProcessWithOtherPlacementRefusesToStart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*procConfig)
		want   string
	}{
		{"placement", func(c *procConfig) { c.Placement[1] = c.Placement[0] }, "the plan places"},
		{"partitions", func(c *procConfig) { c.Partitions[1] = nil }, "the inputs split"},
		{"barriers", func(c *procConfig) { c.Barriers = "sideways" }, "sideways"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, opts, pl := preparedEnv(t, &scenario{job: "keyed-count", inputs: inputs("keyed-count", 200, 0, 1), parallelism: 2})
			cfg, err := workerConfig(env, opts, pl, "r1", 2)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(&cfg)
			b, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := run.StartFleet(context.Background(), env.FleetConfig(Executor{}.Name(), b, 2))
			if err == nil {
				f.Close()
				t.Fatal("a worker with another configuration than its plan's started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start failed with %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestProcessWorkersEqualTheOracle: with every task in a worker process
// (subtask i on worker i) and every channel between two of them a wire
// data channel straight from one to the other (their mesh), the output
// equals the oracle's for each job, barrier mode and sink mode, with no
// crash, and the keyBy's rows did cross between the workers; every worker
// process ended by itself with its checked allocator at zero.
func TestProcessWorkersEqualTheOracle(t *testing.T) {
	for _, jobName := range []string{"keyed-count", "join", "windowed-sum"} {
		for _, b := range bothBarrierModes {
			for _, mode := range sinks {
				sc := &scenario{job: jobName, inputs: inputs(jobName, 3000, 0, 1), barriers: b, mode: mode, processes: true}
				t.Run(fmt.Sprintf("%s/%s/%s", jobName, b, mode), func(t *testing.T) {
					o := sc.execute(t)
					if o.err != nil {
						t.Fatalf("%s: %v", sc, o.err)
					}
					o.check(t, sc.String())
					if kills := runtest.CheckNoOrphans(t, o.ended); kills != 0 || len(o.ended) != 2 {
						t.Fatalf("%d of %d processes SIGKILLed, want 0 of 2", kills, len(o.ended))
					}
					if c := o.summary.Checkpoints; c == nil || c.Completed < 1 {
						t.Fatalf("%s: no checkpoint completed (%+v)", sc, c)
					}
					if o.summary.RecordsIn != 3000 {
						t.Fatalf("%s: %d records read, want 3000", sc, o.summary.RecordsIn)
					}
					if w := o.summary.Workers; w == nil || w.LinkRows <= 0 || w.Started != 2 {
						t.Fatalf("%s: the summary's workers %+v; want 2 processes, and some rows gone worker to worker directly over the keyBy between them", sc, w)
					}
				})
			}
		}
	}
}

// checkProcessKills: the run crashed crashes times, every crash was a
// worker process's death with its detect and acquire measured (nothing
// modelled), and the processes ended as killed kills and started started.
func checkProcessKills(t *testing.T, sc *scenario, o *result, crashes, started int) {
	t.Helper()
	if o.err != nil {
		t.Fatalf("%s: %v", sc, o.err)
	}
	o.check(t, sc.String())
	if o.summary.Crashes != crashes {
		t.Fatalf("%s: %d crashes, want %d%s", sc, o.summary.Crashes, crashes, o.processStory())
	}
	for i, r := range o.summary.Recoveries {
		if r.DetectMs == nil || r.AcquireMs == nil || *r.AcquireMs <= 0 || *r.DetectMs < 0 || len(r.Modelled) != 0 {
			t.Fatalf("%s: recovery %d: detect %v, acquire %v, modelled %v; want both measured", sc, i, r.DetectMs, r.AcquireMs, r.Modelled)
		}
	}
	if kills := runtest.CheckNoOrphans(t, o.ended); kills != crashes || len(o.ended) != started {
		t.Fatalf("%s: %d of %d processes SIGKILLed, want %d of %d%s", sc, kills, len(o.ended), crashes, started, o.processStory())
	}
}

// processStory is, for a failure's message, how each worker process
// ended, the recoveries' causes and what the run logged.
func (o *result) processStory() string {
	var b strings.Builder
	for _, e := range o.ended {
		fmt.Fprintf(&b, "\n  worker %d pid %d: signal %v, err %v", e.ID, e.Pid, e.Signal, e.Err)
	}
	if o.summary != nil {
		for i, r := range o.summary.Recoveries {
			fmt.Fprintf(&b, "\n  recovery %d: %s", i, r.Cause)
		}
	}
	if o.logs != nil {
		fmt.Fprintf(&b, "\n  log:\n%s", o.logs.String())
	}
	return b.String()
}

// processKillSinks are the sink modes the kill tests run: every one.
var processKillSinks = sinks

// TestProcessWorkerSIGKILL: worker 1's process is SIGKILLed after a seeded
// record count, once a recovery point is durable; the run restarts every
// task from it on a replacement process and the output equals the
// reference (duplicates: none for idempotent and transactional, counted
// exactly for append).
func TestProcessWorkerSIGKILL(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, jobName := range []string{"keyed-count", "join"} {
		for _, b := range bothBarrierModes {
			for _, mode := range processKillSinks {
				after := int64(500 + rng.IntN(3000))
				sc := &scenario{job: jobName, inputs: inputs(jobName, 6000, 20000, 3), barriers: b, mode: mode, processes: true,
					fails: []fault.Spec{{Worker: 1, AfterRecords: after, AfterPoint: PointAfterMetadata}}}
				t.Run(fmt.Sprintf("%s/%s/%s", jobName, b, mode), func(t *testing.T) {
					checkProcessKills(t, sc, sc.execute(t), 1, 3)
				})
			}
		}
	}
}

// TestProcessWorkerSIGKILLTwiceInARow: worker 1 is killed, then its
// replacement at its first read (held back until the restore began), in
// both barrier modes and every sink, and the output is still the
// reference's.
func TestProcessWorkerSIGKILLTwiceInARow(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, b := range bothBarrierModes {
		for _, mode := range processKillSinks {
			after := int64(500 + rng.IntN(2000))
			sc := &scenario{job: "keyed-count", inputs: inputs("keyed-count", 6000, 20000, 5), barriers: b, mode: mode, processes: true,
				fails: []fault.Spec{{Worker: 1, AfterRecords: after, AfterPoint: PointAfterMetadata},
					{Worker: 1, AfterRecords: after + 1, AfterPoint: PointMidRestore}}}
			t.Run(fmt.Sprintf("%s/%s", b, mode), func(t *testing.T) {
				checkProcessKills(t, sc, sc.execute(t), 2, 4)
			})
		}
	}
}

// TestProcessWorkerSIGKILLDuringRecovery: worker 0 is killed after a
// seeded record count, and worker 1 while the coordinator restores the
// recovery point for the first restart; both are replaced, and the output
// is the reference's.
func TestProcessWorkerSIGKILLDuringRecovery(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, b := range bothBarrierModes {
		after := int64(500 + rng.IntN(2000))
		sc := &scenario{job: "join", inputs: inputs("join", 6000, 20000, 7), barriers: b, mode: sink.Transactional, processes: true,
			fails: []fault.Spec{{Worker: 0, AfterRecords: after, AfterPoint: PointAfterMetadata},
				{Worker: 1, AtPoint: PointMidRestore, Occurrence: 1}}}
		t.Run(b.String(), func(t *testing.T) {
			checkProcessKills(t, sc, sc.execute(t), 2, 4)
		})
	}
}

// TestProcessWorkerDyingOnItsOwn: a worker process killed from outside
// the run (as the OOM killer would) is a broken connection like a kill of
// the run's: it is billed (its detect 0, the moment unknown; its acquire
// measured), replaced, and the output is the reference's.
func TestProcessWorkerDyingOnItsOwn(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: inputs("keyed-count", 6000, 20000, 9), mode: sink.Idempotent, processes: true}
	killed := make(chan error, 1)
	sc.opts.hooks.fleetStarted = func(f *run.Fleet) {
		go func() {
			time.Sleep(100 * time.Millisecond)
			killed <- syscall.Kill(f.Current(1).Pid(), syscall.SIGKILL)
		}()
	}
	o := sc.execute(t)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	checkProcessKills(t, sc, o, 1, 3)
	if r := o.summary.Recoveries[0]; *r.DetectMs != 0 {
		t.Fatalf("detect %v ms for a death the run did not cause, want 0", *r.DetectMs)
	}
}

// TestProcessWorkerTaskPoints: a fault at a point only tasks pass, in a
// worker process: the task asks its coordinator there, the coordinator
// counts the occurrence and SIGKILLs the worker that reached it, and the
// run restarts on a replacement to the reference's output. Every task
// point, both barrier modes where the point has them, the sinks spread
// over the points by a seed; the fault must fire.
func TestProcessWorkerTaskPoints(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, p := range taskPoints {
		for _, b := range bothBarrierModes {
			jobName := "keyed-count"
			if p == PointDuringAlignment {
				if b.barriers == "unaligned" {
					continue // unaligned checkpoints never align
				}
				jobName = "join" // a task of several inputs
			}
			mode := sinks[rng.IntN(len(sinks))]
			occ := 1 + rng.IntN(2)
			sc := &scenario{job: jobName, inputs: inputs(jobName, 6000, 20000, int64(3+occ)), barriers: b, mode: mode, processes: true,
				fails: []fault.Spec{at(p, occ)}}
			t.Run(fmt.Sprintf("%s/%s/%s/%d", p, b, mode, occ), func(t *testing.T) {
				o := sc.execute(t)
				if pending := o.env.Faults.Pending(); len(pending) > 0 {
					t.Fatalf("%s: fault never fired: %v", sc, pending)
				}
				checkProcessKills(t, sc, o, 1, 3)
			})
		}
	}
}

// TestProcessWorkerFrozen: a worker process stopped by SIGSTOP keeps its
// connection open but sends nothing, so it is declared dead once the
// heartbeat timeout has passed, SIGKILLed before its replacement starts
// (two incarnations never share its tasks), and the run ends with the
// reference's output.
func TestProcessWorkerFrozen(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: inputs("keyed-count", 6000, 20000, 11), mode: sink.Transactional, processes: true,
		heartbeatTimeout: time.Second}
	frozen := make(chan error, 1)
	sc.opts.hooks.fleetStarted = func(f *run.Fleet) {
		go func() {
			time.Sleep(100 * time.Millisecond)
			frozen <- syscall.Kill(f.Current(1).Pid(), syscall.SIGSTOP)
		}()
	}
	begin := time.Now()
	o := sc.execute(t)
	if err := <-frozen; err != nil {
		t.Fatal(err)
	}
	checkProcessKills(t, sc, o, 1, 3)
	if took := time.Since(begin); took < time.Second {
		t.Fatalf("the run took %s: a frozen worker cannot have been declared dead before the 1 s timeout", took)
	}
}
