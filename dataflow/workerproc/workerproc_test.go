package workerproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/wire"
)

// The workers here are this test binary, re-executed: a worker joins the
// coordinator at REWIND_TEST_COORD with REWIND_TEST_TOKEN, beats, leaves a
// file in its working directory and waits to be killed.
const (
	envRole  = "REWIND_WORKERPROC_ROLE"
	envCoord = "REWIND_TEST_COORD"
	envToken = "REWIND_TEST_TOKEN"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envRole) {
	case "worker":
		os.Exit(runWorker())
	case "coordinator":
		os.Exit(runCoordinator())
	}
	os.Exit(m.Run())
}

func runWorker() int {
	id := os.Args[len(os.Args)-1]
	if err := os.WriteFile("scratch", []byte("worker-local state"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv(envCoord) == "" {
		select {} // no coordinator to join: wait to be killed
	}
	c, _, err := wire.Dial(context.Background(), os.Getenv(envCoord), wire.Hello{Token: os.Getenv(envToken), Worker: id},
		wire.Options{HeartbeatInterval: 20 * time.Millisecond, Log: func(string, ...any) {}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-c.Done() // the coordinator gone: nothing left to do
	return 0
}

// runCoordinator starts one worker, prints its pid and waits to be
// killed: the test then checks the worker died with it.
func runCoordinator() int {
	p, err := NewPool(Spec{Args: func(id int) []string { return []string{"-test.run=^$", strconv.Itoa(id)} },
		Env: []string{envRole + "=worker", envCoord + "="}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	proc, err := p.Start(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(proc.Pid())
	select {}
}

type cluster struct {
	t     *testing.T
	l     *wire.Listener
	pool  *Pool
	token string
}

func newCluster(t *testing.T, heartbeatTimeout time.Duration) *cluster {
	t.Helper()
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l, err := wire.Listen("", wire.ListenConfig{Token: token,
		Conn: wire.Options{HeartbeatTimeout: heartbeatTimeout, Log: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := NewPool(Spec{
		Args: func(id int) []string { return []string{"-test.run=^$", strconv.Itoa(id)} },
		Env:  []string{envRole + "=worker", envCoord + "=" + l.Addr(), envToken + "=" + token},
		Root: t.TempDir(),
		Log:  t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Error(err)
		}
		_ = l.Close()
		for _, proc := range pool.all {
			if alive(proc.Pid()) {
				t.Errorf("worker %d (pid %d) outlived the pool", proc.ID, proc.Pid())
			}
		}
	})
	return &cluster{t: t, l: l, pool: pool, token: token}
}

// join starts worker id and waits for its Hello.
func (c *cluster) join(id int) (*Process, *wire.Conn, time.Duration) {
	c.t.Helper()
	proc, err := c.pool.Start(id)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, hello, err := c.l.Accept(ctx)
	if err != nil {
		c.t.Fatalf("worker %d did not join: %v", id, err)
	}
	if hello.Worker != strconv.Itoa(id) {
		c.t.Fatalf("hello from worker %q, want %d", hello.Worker, id)
	}
	c.t.Cleanup(func() { _ = conn.Close() })
	return proc, conn, c.pool.Joined(proc)
}

// alive says whether pid is a running process; a zombie (dead, not yet
// reaped: in a container, pid 1 may never reap) is not.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name's closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s never appeared", path)
}

func TestAKilledWorkerIsDetectedAndReplacedByAFreshProcess(t *testing.T) {
	c := newCluster(t, 0)
	proc, conn, acquire := c.join(0)
	t.Logf("acquire (fork to joined): %s", acquire)
	if acquire <= 0 {
		t.Fatalf("acquire %s", acquire)
	}
	scratch := filepath.Join(proc.Dir, "scratch")
	waitFile(t, scratch)

	killed, err := c.pool.Kill(0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a SIGKILLed worker's connection never broke")
	}
	detect := time.Since(killed)
	t.Logf("detect (SIGKILL to broken connection): %s; reason: %v", detect, conn.Err())
	<-proc.Exited()
	if !strings.Contains(exitText(proc.Err()), "killed") {
		t.Fatalf("worker exited with %v, want killed by a signal", proc.Err())
	}
	if _, err := os.Stat(proc.Dir); !os.IsNotExist(err) {
		t.Fatalf("the dead worker's directory %s is still there (%v)", proc.Dir, err)
	}

	next, _, _ := c.join(0)
	if next.Incarnation != 1 || next.Dir == proc.Dir {
		t.Fatalf("replacement is incarnation %d in %s", next.Incarnation, next.Dir)
	}
	if next.Pid() == proc.Pid() {
		t.Fatal("replacement has the dead worker's pid")
	}
	waitFile(t, filepath.Join(next.Dir, "scratch"))
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatal("the first incarnation's file survived into the replacement")
	}
}

func TestAFrozenWorkerIsDeclaredDeadByItsMissingHeartbeats(t *testing.T) {
	const timeout = 400 * time.Millisecond
	c := newCluster(t, timeout)
	proc, conn, _ := c.join(0)
	time.Sleep(2 * timeout)
	if err := conn.Err(); err != nil {
		t.Fatalf("a beating worker was declared dead: %v", err)
	}
	if err := syscall.Kill(proc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	select {
	case <-conn.Done():
	case <-time.After(20 * timeout):
		t.Fatal("a frozen worker was never declared dead")
	}
	detect := time.Since(stopped)
	if !errors.Is(conn.Err(), wire.ErrPeerSilent) {
		t.Fatalf("declared dead with %v, want missed heartbeats", conn.Err())
	}
	t.Logf("detect (SIGSTOP to declared dead, timeout %s): %s", timeout, detect)
	// A stopped process still takes SIGKILL.
	if _, err := c.pool.Kill(0); err != nil {
		t.Fatal(err)
	}
	<-proc.Exited()
}

func TestNoWorkerOutlivesItsCoordinator(t *testing.T) {
	// A coordinator process starts a worker, then is SIGKILLed itself.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=coordinator")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("coordinator printed no worker pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if !alive(pid) {
		t.Fatalf("worker %d is not running before the coordinator dies", pid)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("worker %d outlived its SIGKILLed coordinator", pid)
		}
	}
}

func TestStartingALiveWorkerTwiceIsRefused(t *testing.T) {
	c := newCluster(t, 0)
	c.join(0)
	if _, err := c.pool.Start(0); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("second Start of a live worker: %v", err)
	}
}
