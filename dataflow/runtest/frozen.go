//go:build unix

package runtest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// PrivateS3 is a versitygw of one test's own, started with
// scripts/s3-server.sh, so that freezing it (SIGSTOP) disturbs no other
// test. Its kernel still accepts connections while it is frozen: requests
// hang rather than being refused, as with a server that stopped answering.
type PrivateS3 struct {
	Endpoint, AccessKey, SecretKey string

	t      testing.TB
	pid    int
	mu     sync.Mutex
	frozen bool
	thaw   *time.Timer
}

// StartPrivateS3 starts a private versitygw and stops it in cleanup (after
// continuing it if it is frozen). Without versitygw installed the test is
// skipped, or fails under REWIND_REQUIRE_S3=1, as the other S3 tests.
func StartPrivateS3(t testing.TB) *PrivateS3 {
	t.Helper()
	script := filepath.Join(repoRoot(t), "scripts", "s3-server.sh")
	dir := t.TempDir()
	cmd := exec.Command(script, "start", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("starting a private versitygw: %v: %s", err, stderr.String())
		if strings.Contains(stderr.String(), "versitygw not found") && os.Getenv(RequireS3Env) != "1" {
			t.Skip(msg)
		}
		t.Fatal(msg)
	}
	s := &PrivateS3{t: t}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok {
			continue
		}
		switch k {
		case storage.EnvS3Endpoint:
			s.Endpoint = v
		case storage.EnvAccessKey:
			s.AccessKey = v
		case storage.EnvSecretKey:
			s.SecretKey = v
		}
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err == nil {
		s.pid, err = strconv.Atoi(strings.TrimSpace(string(pidText)))
	}
	if err != nil || s.Endpoint == "" {
		t.Fatalf("private versitygw: no pid or endpoint (%v); script said:\n%s%s", err, out, stderr.String())
	}
	t.Cleanup(func() {
		s.Thaw()
		stop := exec.Command(script, "stop", dir)
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("stopping the private versitygw: %v: %s", err, out)
		}
	})
	return s
}

// Options are storage options reaching this server, with the given
// per-call timeout.
func (s *PrivateS3) Options(callTimeout time.Duration) storage.Options {
	return storage.Options{Endpoint: s.Endpoint, AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey,
		CallTimeout: callTimeout}
}

// URL is a fresh storage location on this server.
func (s *PrivateS3) URL(t testing.TB) string {
	return fmt.Sprintf("s3://frozen/%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// Freeze stops the server (SIGSTOP) and, when thawAfter > 0, continues it
// (SIGCONT) that much later.
func (s *PrivateS3) Freeze(thawAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen {
		return
	}
	if err := syscall.Kill(s.pid, syscall.SIGSTOP); err != nil {
		s.t.Errorf("SIGSTOP versitygw %d: %v", s.pid, err)
		return
	}
	s.frozen = true
	// kill returns before every thread has stopped: a thread running on
	// another CPU may still answer a request. Wait until each one is in
	// state T, so a call made after Freeze really meets a frozen server.
	if err := waitStopped(s.pid, 5*time.Second); err != nil {
		s.t.Errorf("SIGSTOP versitygw %d: %v", s.pid, err)
	}
	if thawAfter > 0 {
		s.thaw = time.AfterFunc(thawAfter, s.Thaw)
	}
}

// Frozen reports whether the server is stopped now.
func (s *PrivateS3) Frozen() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.frozen
}

// Thaw continues a frozen server; it does nothing when it is running.
func (s *PrivateS3) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thaw != nil {
		s.thaw.Stop()
		s.thaw = nil
	}
	if !s.frozen {
		return
	}
	if err := syscall.Kill(s.pid, syscall.SIGCONT); err != nil {
		s.t.Errorf("SIGCONT versitygw %d: %v", s.pid, err)
	}
	s.frozen = false
}

// repoRoot is the directory holding go.mod, above the test's directory.
func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// FreezeAt wraps st so that the first call for which at(op, name) is true
// freezes srv just before it is sent, and srv is continued thawAfter later
// (never, when thawAfter is 0): the freeze lands at a chosen event, not
// after a guessed sleep. op is "put", "get", "list" or "delete". Fired
// reports whether it happened.
func FreezeAt(st storage.Store, srv *PrivateS3, thawAfter time.Duration, at func(op, name string) bool) *FreezingStore {
	f := &FreezingStore{srv: srv, thawAfter: thawAfter, at: at}
	f.hookStore = hookStore{Store: st, before: f.maybe}
	return f
}

// FreezingStore is the store FreezeAt returns.
type FreezingStore struct {
	hookStore
	srv       *PrivateS3
	thawAfter time.Duration
	at        func(op, name string) bool
	once      sync.Once
	fired     bool
	firedAt   time.Time
	mu        sync.Mutex
}

func (f *FreezingStore) maybe(op, name string) {
	if !f.at(op, name) {
		return
	}
	f.once.Do(func() {
		f.mu.Lock()
		f.fired, f.firedAt = true, time.Now()
		f.mu.Unlock()
		f.srv.Freeze(f.thawAfter)
	})
}

// Fired reports whether the freeze happened, and when.
func (f *FreezingStore) Fired() (bool, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired, f.firedAt
}

// waitStopped waits until every thread of pid is stopped (state T or t in
// /proc/PID/task/TID/stat). Where there is no /proc it returns at once.
func waitStopped(pid int, limit time.Duration) error {
	tasks := fmt.Sprintf("/proc/%d/task", pid)
	if _, err := os.Stat(tasks); err != nil {
		return nil
	}
	deadline := time.Now().Add(limit)
	for {
		running, err := runningThreads(tasks)
		if err != nil || running == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d threads still running %v after the signal", running, limit)
		}
		time.Sleep(time.Millisecond)
	}
}

func runningThreads(tasks string) (int, error) {
	ids, err := os.ReadDir(tasks)
	if err != nil {
		return 0, err
	}
	running := 0
	for _, id := range ids {
		stat, err := os.ReadFile(filepath.Join(tasks, id.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return 0, fmt.Errorf("unreadable %s/%s/stat", tasks, id.Name())
		}
		if st := stat[i+2]; st != 'T' && st != 't' {
			running++
		}
	}
	return running, nil
}
