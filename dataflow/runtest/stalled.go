//go:build unix

package runtest

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// StallRun is one run of exec with cfg against st, a store the test opened
// (typically a PrivateS3 behind FreezeAt), with the run's log kept. A run
// that fails is returned with Err set and nothing resolved; one that
// succeeds is resolved and has the oracle's answer, for CheckOutput.
func StallRun(t testing.TB, exec run.Executor, cfg run.Config, st storage.Store) (Outcome, *Logs) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute+2*StallLongLimit)
	defer cancel()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	logs := &Logs{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env, err := run.Prepare(ctx, cfg, alloc, log, false, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	env.Store = st
	o := Outcome{Env: env}
	o.Summary, o.Err = exec.Run(ctx, env)
	if ctx.Err() != nil {
		t.Fatalf("the run was still going at the test's deadline: %v", o.Err)
	}
	if o.Err == nil {
		if err := run.Finish(env, o.Summary); err != nil {
			t.Fatalf("finish: %v", err)
		}
	}
	if err := env.Close(); err != nil {
		t.Fatalf("closing env: %v", err)
	}
	alloc.AssertSize(t, 0)
	if o.Err != nil {
		return o, logs
	}
	o.Table, o.Stats, err = sink.Resolve(cfg.Output, env.Job.Output)
	if err != nil {
		t.Fatalf("resolving output: %v", err)
	}
	o.Want = Oracle(t, cfg)
	return o, logs
}

// StallRunUntil runs exec with cfg against st until the progress event
// holding every string of match has passed n times, then stops it from
// outside, leaving storage as a process dying there would; st is closed.
func StallRunUntil(t testing.TB, exec run.Executor, cfg run.Config, st storage.Store, n int, match ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stopped := false
	cfg.Progress = &EventStop{Match: match, N: n, Stop: func() { stopped = true; cancel() }}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(ctx, cfg, alloc, slog.New(slog.DiscardHandler), false, run.OutputResume)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	env.Store = st
	_, err = exec.Run(ctx, env)
	if err := env.Close(); err != nil {
		t.Fatalf("closing env: %v", err)
	}
	alloc.AssertSize(t, 0)
	if !stopped {
		t.Fatalf("the first process ended (err %v) before %d progress events holding %q", err, n, match)
	}
}

// Logs collects a run's log lines; safe for concurrent writers.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// CheckWaitedOut asserts the log says storage stopped answering and then
// answered again.
func CheckWaitedOut(t testing.TB, what string, logs *Logs) {
	t.Helper()
	s := logs.String()
	for _, want := range []string{"storage is not answering", "storage answers again"} {
		if !strings.Contains(s, want) {
			t.Fatalf("%s: the log does not say %q; it holds:\n%s", what, want, s)
		}
	}
}

// CheckGaveUp asserts a run failed because storage did not answer for its
// limit: the error wraps storage.ErrUnreachable, names the store and says
// so, and it came within slack of the limit.
func CheckGaveUp(t testing.TB, what string, o Outcome, url string, frozenAt time.Time, limit, slack time.Duration) {
	t.Helper()
	if o.Err == nil {
		t.Fatalf("%s: the run succeeded though storage never answered again", what)
	}
	if !errors.Is(o.Err, storage.ErrUnreachable) {
		t.Fatalf("%s: error %v does not wrap storage.ErrUnreachable", what, o.Err)
	}
	for _, want := range []string{url, "has not answered for"} {
		if !strings.Contains(o.Err.Error(), want) {
			t.Fatalf("%s: error %q does not say %q", what, o.Err, want)
		}
	}
	if took := time.Since(frozenAt); took > limit+slack {
		t.Fatalf("%s: the run gave up %v after the freeze; the limit is %v", what, took.Round(time.Millisecond), limit)
	}
}

// SoakEnv, set to 1 (make soak), runs the stall tests with the production
// deadlines: the default --storage-timeout, a 25 s freeze, the default
// outage limit.
const SoakEnv = "REWIND_SOAK"

// Deadlines of the stall tests: small, so a test takes seconds, unless
// $REWIND_SOAK=1.
var (
	StallCallTimeout = 300 * time.Millisecond
	StallThawAfter   = 1500 * time.Millisecond // five call timeouts
	StallLongLimit   = 10 * time.Second        // outlasts StallThawAfter
	StallShortLimit  = 2 * time.Second         // shorter than the freeze
)

func init() {
	if os.Getenv(SoakEnv) == "1" {
		StallCallTimeout = storage.DefaultCallTimeout
		StallThawAfter = 25 * time.Second
		StallLongLimit = storage.DefaultOutageLimit
		StallShortLimit = storage.DefaultOutageLimit
	}
}

// CheckStorageStall runs exec with cfg twice against a private versitygw
// that is frozen (SIGSTOP) at the first storage call for which at is true:
//   - "continued": the server is continued after StallThawAfter, within
//     the outage limit: the run logs that storage is not answering, waits
//     or retries, logs that it answers again, and its output equals the
//     oracle's;
//   - "never-continued": the freeze outlasts the limit: the run fails with
//     an error wrapping storage.ErrUnreachable that names the store, soon
//     after the limit, instead of hanging.
//
// continued are further checks of the continued run. cfg needs no Storage
// or Output; prepare, when set, runs first with the
// same storage and output, on a store of its own from open (a process that
// died, for a resume).
func CheckStorageStall(t *testing.T, exec run.Executor, cfg run.Config,
	prepare func(t *testing.T, cfg run.Config, open func() storage.Store), at func(op, name string) bool,
	continued ...func(t *testing.T, o Outcome)) {
	for _, long := range []bool{false, true} {
		name := map[bool]string{false: "continued", true: "never-continued"}[long]
		t.Run(name, func(t *testing.T) {
			srv := StartPrivateS3(t)
			url := srv.URL(t)
			open := func() storage.Store {
				st, err := storage.Open(context.Background(), url, srv.Options(StallCallTimeout))
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
			cfg := cfg
			cfg.Storage, cfg.Output = url, t.TempDir()+"/out"
			cfg.StorageTimeout, cfg.StorageOutageLimit = StallCallTimeout, StallLongLimit
			thaw := StallThawAfter
			if long {
				cfg.StorageOutageLimit, thaw = StallShortLimit, 0
			}
			if prepare != nil {
				prepare(t, cfg, open)
			}
			fs := FreezeAt(open(), srv, thaw, at)
			o, logs := StallRun(t, exec, cfg, fs)
			fired, at := fs.Fired()
			if !fired {
				t.Fatalf("the run never made the storage call the freeze waits for (err %v)", o.Err)
			}
			if long {
				CheckGaveUp(t, name, o, url, at, cfg.StorageOutageLimit, 2*StallCallTimeout+5*time.Second)
				t.Logf("gave up %v after the freeze: %v", time.Since(at).Round(time.Millisecond), o.Err)
				return
			}
			if srv.Frozen() {
				t.Fatal("the run finished while storage was still frozen")
			}
			CheckOutput(t, name, o)
			CheckWaitedOut(t, name, logs)
			for _, check := range continued {
				check(t, o)
			}
		})
	}
}

// CheckStorageLatency runs exec with cfg with its storage behind a
// loopback proxy that delays every chunk by a tenth of StallCallTimeout (at
// most 30 ms):
// first with ten times that as the call timeout (slow, but well within
// every deadline: the run must not log an outage), then with
// StallCallTimeout and with a spell of latency above the call timeout from the
// first storage call for which at is true, lifted StallThawAfter later (the
// run logs the wait and completes). Both runs' outputs equal the oracle's.
func CheckStorageLatency(t *testing.T, exec run.Executor, cfg run.Config, at func(op, name string) bool) {
	for _, spell := range []bool{false, true} {
		name := map[bool]string{false: "within-deadline", true: "spell-above-deadline"}[spell]
		t.Run(name, func(t *testing.T) {
			srv := StartPrivateS3(t)
			proxy := StartSlowProxy(t, srv.Endpoint, 0, 0)
			proxy.SetDelay(min(StallCallTimeout/10, 30*time.Millisecond))
			url := srv.URL(t)
			// Within the deadline means well within it: a loaded machine
			// must not turn slow into silent.
			callTimeout := 10 * StallCallTimeout
			if spell {
				callTimeout = StallCallTimeout
			}
			opts := srv.Options(callTimeout)
			opts.Endpoint, opts.Timeout = proxy.Endpoint, max(storage.DefaultTimeout, callTimeout)
			st, err := storage.Open(context.Background(), url, opts)
			if err != nil {
				t.Fatal(err)
			}
			cfg := cfg
			cfg.Storage, cfg.Output = url, t.TempDir()+"/out"
			cfg.StorageTimeout, cfg.StorageOutageLimit = callTimeout, StallLongLimit
			var fired atomic.Bool
			if spell {
				st = &hookStore{Store: st, before: func(op, name string) {
					if at(op, name) && fired.CompareAndSwap(false, true) {
						proxy.SetDelay(3 * StallCallTimeout)
						time.AfterFunc(StallThawAfter, func() { proxy.SetDelay(0) })
					}
				}}
			}
			o, logs := StallRun(t, exec, cfg, st)
			CheckOutput(t, name, o)
			if !spell {
				if strings.Contains(logs.String(), "storage is not answering") {
					t.Fatalf("latency within the deadline was taken for an outage:\n%s", logs)
				}
				return
			}
			if !fired.Load() {
				t.Fatal("the run never made the storage call the latency spell waits for")
			}
			CheckWaitedOut(t, name, logs)
		})
	}
}

// hookStore calls before ahead of every call.
type hookStore struct {
	storage.Store
	before func(op, name string)
}

func (h *hookStore) Put(ctx context.Context, name string, data []byte) error {
	h.before("put", name)
	return h.Store.Put(ctx, name, data)
}

func (h *hookStore) Get(ctx context.Context, name string) ([]byte, error) {
	h.before("get", name)
	return h.Store.Get(ctx, name)
}

func (h *hookStore) List(ctx context.Context, prefix string) ([]storage.Object, error) {
	h.before("list", prefix)
	return h.Store.List(ctx, prefix)
}

func (h *hookStore) Delete(ctx context.Context, name string) error {
	h.before("delete", name)
	return h.Store.Delete(ctx, name)
}

// SoakOnly skips a test that is too long for make test unless
// $REWIND_SOAK=1 (make soak).
func SoakOnly(t testing.TB) {
	t.Helper()
	if os.Getenv(SoakEnv) != "1" {
		t.Skipf("a longer variant: runs under %s=1 (make soak)", SoakEnv)
	}
}
