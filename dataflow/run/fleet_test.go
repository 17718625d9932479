package run_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// fleetWorkerEnv makes this test binary a fleet worker: "echo" says ready
// and echoes every control message until its connection closes; "fail"
// says it could not start.
const fleetWorkerEnv = "REWIND_RUN_TEST_FLEET_WORKER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fleetWorkerEnv); mode != "" {
		os.Exit(fleetWorker(mode))
	}
	os.Exit(m.Run())
}

func fleetWorker(mode string) int {
	id, err := strconv.Atoi(os.Args[2])
	if err != nil {
		return 2
	}
	ctx := context.Background()
	c, wel, err := run.JoinCoordinator(ctx, os.Args[1], id, wire.Options{HeartbeatInterval: 50 * time.Millisecond, Log: func(string, ...any) {}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	if mode == "fail" {
		_ = run.SendFailed(c, errors.New("cannot open input x: no such file"))
		return 1
	}
	if wel.Executor != "fleet-test" || string(wel.Config) != `{"k":1}` {
		_ = run.SendFailed(c, fmt.Errorf("welcome %q %s", wel.Executor, wel.Config))
		return 1
	}
	if run.SendReady(c) != nil {
		return 1
	}
	for {
		b, err := c.Control(ctx)
		if err != nil {
			return 0
		}
		if c.SendControl(append([]byte(strconv.Itoa(id)+":"), b...)) != nil {
			return 0
		}
	}
}

func startTestFleet(t *testing.T, mode string, n int) (*run.Fleet, error) {
	t.Helper()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() {
		if left := alloc.CurrentAlloc(); left != 0 {
			t.Errorf("%d bytes of Arrow memory outstanding", left)
		}
	})
	return run.StartFleet(context.Background(), run.FleetConfig{Executor: "fleet-test", Config: []byte(`{"k":1}`), N: n,
		Command: &run.WorkerCommand{Binary: os.Args[0], Env: []string{fleetWorkerEnv + "=" + mode},
			Args: func(addr string, id int) []string { return []string{addr, strconv.Itoa(id)} }},
		Alloc: alloc, HeartbeatTimeout: 5 * time.Second})
}

// echo sends msg to worker id and wants it back from that worker.
func echo(t *testing.T, f *run.Fleet, id int, msg string) {
	t.Helper()
	s := f.Slot(id)
	if err := s.Conn.SendControl([]byte(msg)); err != nil {
		t.Fatalf("worker %d: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := s.Conn.Control(ctx)
	if err != nil {
		t.Fatalf("worker %d: %v", id, err)
	}
	if want := strconv.Itoa(id) + ":" + msg; string(b) != want {
		t.Fatalf("worker %d answered %q, want %q", id, b, want)
	}
}

func TestFleetStartsKillsAndReplacesWorkerProcesses(t *testing.T) {
	f, err := startTestFleet(t, "echo", 2)
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
		if f.Slot(id).Acquire <= 0 {
			t.Fatalf("worker %d: acquire %v, want measured", id, f.Slot(id).Acquire)
		}
		echo(t, f, id, "hello")
	}
	old := f.Slot(1)
	oldPid := old.Proc.Pid()
	killed, detected, err := f.Kill(1)
	if err != nil {
		t.Fatal(err)
	}
	if killed.IsZero() || detected.Before(killed) {
		t.Fatalf("killed at %v, detected at %v: want a kill, then its detection", killed, detected)
	}
	// A second kill of the same incarnation is the same death.
	if k2, d2, err := f.Kill(1); err != nil || !k2.Equal(killed) || !d2.Equal(detected) {
		t.Fatalf("second kill: %v %v %v, want the first one's %v %v", k2, d2, err, killed, detected)
	}
	acquire, err := f.Replace(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if acquire <= 0 || f.Slot(1) == old || f.Slot(1).Proc.Pid() == oldPid || runtest.Alive(oldPid) {
		t.Fatalf("replacement: acquire %v, pid %d (old %d, alive %v)", acquire, f.Slot(1).Proc.Pid(), oldPid, runtest.Alive(oldPid))
	}
	echo(t, f, 1, "again")
	echo(t, f, 0, "still")
	if f.Started() != 3 {
		t.Fatalf("%d processes started, want 3", f.Started())
	}
	f.Close()
	closed = true
	ended := f.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d processes ended, want 3: %+v", len(ended), ended)
	}
	kills := runtest.CheckNoOrphans(t, ended)
	if kills != 1 {
		t.Fatalf("%d processes ended by SIGKILL, want 1: %+v", kills, ended)
	}
}

func TestFleetWorkerThatCannotStartFailsTheStartWithItsReason(t *testing.T) {
	f, err := startTestFleet(t, "fail", 1)
	if err == nil {
		f.Close()
		t.Fatal("a worker that said failed was taken as ready")
	}
	if !strings.Contains(err.Error(), "worker process 0 could not start: cannot open input x") {
		t.Fatalf("error %q does not give the worker's reason", err)
	}
}

func TestFleetGivesUpOnWorkersThatKeepDying(t *testing.T) {
	f := &run.Fleet{}
	if err := f.LostOnItsOwn(time.Now(), errors.New("killed by the run")); err != nil {
		t.Fatalf("a kill of the run's counted as lost: %v", err)
	}
	for i := range run.FleetMaxLost {
		if err := f.LostOnItsOwn(time.Time{}, fmt.Errorf("death %d", i)); err != nil {
			t.Fatalf("gave up after %d deaths: %v", i+1, err)
		}
	}
	err := f.LostOnItsOwn(time.Time{}, errors.New("the last death"))
	if err == nil || !strings.Contains(err.Error(), "the last death") {
		t.Fatalf("after %d deaths: %v, want giving up naming the last", run.FleetMaxLost+1, err)
	}
}

func TestProcessInputsAreAbsoluteAndRereadable(t *testing.T) {
	got, err := run.ProcessInputs(map[string]string{"a": "file:in.csv", "b": "file:/x/y.csv", "c": "gen:records=5"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if got["a"] != "file:"+filepath.Join(wd, "in.csv") || got["b"] != "file:/x/y.csv" || got["c"] != "gen:records=5" {
		t.Fatalf("inputs %v", got)
	}
	push, err := source.Open("push:listen=127.0.0.1:0", source.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	_, err = run.ProcessInputs(map[string]string{"p": "push:listen=127.0.0.1:0"}, map[string]source.Source{"p": push})
	var re run.RefusedError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "forgetful") {
		t.Fatalf("a forgetful input: %v, want refused", err)
	}
}
