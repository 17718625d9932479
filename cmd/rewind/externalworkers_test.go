package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// externalRun is a test's directory, the run's token (in the environment
// every process it starts inherits) and the coordinator's address.
func externalRun(t *testing.T) (dir, addr string) {
	t.Helper()
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(run.TokenEnv, token)
	return t.TempDir(), freeLoopbackAddr(t)
}

// freeLoopbackAddr is a loopback address with a port nothing listens on
// (a coordinator with --worker-launch external needs a fixed one).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// scheduled is what a test's stand-in scheduler saw of one worker id: how
// each incarnation it started ended.
type scheduled struct {
	mu    sync.Mutex
	ended []*cliProcess
}

// schedule starts `rewind worker --id id` and starts it again each time it
// dies of a signal, as Kubernetes does for a Job's pod with restartPolicy
// OnFailure; an exit (0 at the end of the run, or an error) ends it.
func schedule(t *testing.T, dir, addr string, id int, wg *sync.WaitGroup) *scheduled {
	s := &scheduled{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 5 {
			p := startCLI(t, dir, "worker", "--coordinator", addr, "--id", fmt.Sprint(id))
			select {
			case <-p.exited:
			case <-time.After(2 * time.Minute):
				p.kill()
				<-p.exited
			}
			s.mu.Lock()
			s.ended = append(s.ended, p)
			s.mu.Unlock()
			if ws, ok := p.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
				return
			}
		}
	}()
	return s
}

// TestExternalWorkersAreKilledAndReplacedByTheirScheduler: `rewind run
// --worker-launch external` starts no worker itself; two workers started
// from outside (one before the coordinator listens, one after) join with
// the run's token, worker 1 is SIGKILLed at the run's --fail (it kills
// itself when the coordinator asks: the coordinator cannot signal another
// machine's process), the stand-in scheduler starts it again, and the run
// ends with the output equal to an independent count, a bill with
// measured detect and acquire, and every worker process exited.
func TestExternalWorkersAreKilledAndReplacedByTheirScheduler(t *testing.T) {
	dir, addr := externalRun(t)
	const spec = "gen:records=60000,keys=500,partitions=2,seed=4"
	var wg sync.WaitGroup
	w0 := schedule(t, dir, addr, 0, &wg) // dials until the coordinator listens
	p := startCLI(t, dir, "run", "--executor", "diskphase", "--workers", "process", "--worker-launch", "external",
		"--listen", addr, "--job", "keyed-count", "--input", spec, "--job-records", "20000", "--sink-mode", "transactional",
		"--output", "out", "--storage", "data", "--fail", "worker=1,after-records=25000", "--summary", "json", "--progress", "none", "-v")
	w1 := schedule(t, dir, addr, 1, &wg)
	p.wait(t, 2*time.Minute)
	if !p.state.Success() {
		t.Fatalf("exit %s; stderr:\n%s", p.state, p.stderr)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a worker process outlived its run by a minute")
	}
	checkOneMeasuredKill(t, p)
	if !strings.Contains(p.stderr.String(), "waiting for 2 worker processes to join at "+addr) {
		t.Errorf("the coordinator did not say where it waits for its workers:\n%s", p.stderr)
	}
	if len(w0.ended) != 1 || !w0.ended[0].state.Success() {
		t.Errorf("worker 0: %d incarnations, want 1 that exited 0", len(w0.ended))
	}
	if len(w1.ended) != 2 {
		t.Fatalf("worker 1: %d incarnations, want 2 (killed, then its replacement)", len(w1.ended))
	}
	if ok, how := w1.ended[0].killedBySIGKILL(); !ok {
		t.Errorf("worker 1's first process %s, want SIGKILL", how)
	}
	if !w1.ended[1].state.Success() {
		t.Errorf("worker 1's replacement exited %s; stderr:\n%s", w1.ended[1].state, w1.ended[1].stderr)
	}
	checkKeyedCountOutput(t, filepath.Join(dir, "out"), spec)
}

// A coordinator that dies is not the end of its run: its external workers
// exit 1 (a scheduler starts them again, to join the coordinator resumed
// with --resume), where at the end of a run they exit 0.
func TestExternalWorkersExitWithAnErrorWhenTheirCoordinatorDies(t *testing.T) {
	dir, addr := externalRun(t)
	p := startCLI(t, dir, "run", "--executor", "diskphase", "--workers", "process", "--worker-launch", "external",
		"--listen", addr, "--input", "gen:records=50000000,keys=5000", "--job-records", "1000000",
		"--output", "out", "--storage", "data", "--progress", "none", "-v")
	var workers []*cliProcess
	for id := range 2 {
		workers = append(workers, startCLI(t, dir, "worker", "--coordinator", addr, "--id", fmt.Sprint(id), "--join-timeout", "10s"))
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(p.stderr.String(), "worker 0 joined") || !strings.Contains(p.stderr.String(), "worker 1 joined") {
		if time.Now().After(deadline) || !p.running() {
			t.Fatalf("the workers did not join; coordinator's stderr:\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
	<-p.exited
	for id, w := range workers {
		w.wait(t, time.Minute)
		if code := w.state.ExitCode(); code != exitFailure || !strings.Contains(w.stderr.String(), "broke before the run ended") {
			t.Errorf("worker %d after its coordinator's SIGKILL: exit %d, stderr %q; want exit 1 saying the connection broke", id, code, w.stderr)
		}
	}
}

// --listen and --worker-launch are usage errors where they cannot apply:
// with inproc workers, external without a fixed address or without a
// token long enough, and an unknown launch.
func TestWorkerLaunchFlagsAreChecked(t *testing.T) {
	t.Setenv(run.TokenEnv, strings.Repeat("a", run.MinTokenLen))
	base := []string{"run", "--executor", "diskphase", "--input", "gen:records=10"}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:7070"}, "", "invalid --listen: it only applies to worker processes"},
		{[]string{"--worker-launch", "external"}, "", "invalid --worker-launch: it only applies to worker processes"},
		{[]string{"--workers", "process", "--worker-launch", "cron"}, "", `invalid --worker-launch "cron"`},
		{[]string{"--workers", "process", "--listen", "7070"}, "", `invalid --listen "7070"`},
		{[]string{"--workers", "process", "--worker-launch", "external"}, "", "with a fixed port"},
		{[]string{"--workers", "process", "--worker-launch", "external", "--listen", "127.0.0.1:0"}, "", "with a fixed port"},
		{[]string{"--workers", "process", "--worker-launch", "external", "--listen", "127.0.0.1:7070"}, "short", "put the run's token in $" + run.TokenEnv},
	} {
		if c.env != "" {
			t.Setenv(run.TokenEnv, c.env)
		}
		args := append(append(append([]string(nil), base...), "--output", t.TempDir(), "--storage", t.TempDir()), c.args...)
		code, _, stderr := rewind(t, args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", c.args, code, stderr, c.want)
		}
	}
}
