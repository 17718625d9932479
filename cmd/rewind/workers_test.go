package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// An executor that does not run its workers as processes refuses
// --workers process with a usage error naming it; one that does (its
// Traits say so) is not refused here.
func TestWorkersProcessIsRefusedByAnExecutorWithoutIt(t *testing.T) {
	refused := 0
	for _, e := range registry {
		if e.Traits().ProcessWorkers {
			if _, ok := e.(run.ProcessWorker); !ok {
				t.Errorf("executor %s says it runs worker processes but does not implement run.ProcessWorker", e.Name())
			}
			continue
		}
		refused++
		code, _, stderr := rewind(t, "run", "--executor", e.Name(), "--workers", "process", "--output", t.TempDir(),
			"--storage", t.TempDir(), "--input", "gen:records=10")
		if code != exitUsage || !strings.Contains(stderr, "--workers process") || !strings.Contains(stderr, "executor "+e.Name()) {
			t.Errorf("%s --workers process: exit %d, stderr %q; want exit 2 naming the executor", e.Name(), code, stderr)
		}
	}
	if refused == 0 {
		t.Fatal("every executor runs worker processes: nothing was refused")
	}
	code, _, stderr := rewind(t, "run", "--executor", "diskphase", "--workers", "threads", "--output", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, `invalid --workers "threads"`) {
		t.Errorf("--workers threads: exit %d, stderr %q; want exit 2 naming the value", code, stderr)
	}
}

// `rewind worker` takes its token from the environment only: without it
// it says where it looks; with a wrong one the coordinator refuses it.
func TestWorkerWithoutTheTokenIsRefused(t *testing.T) {
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	l, err := wire.Listen("", wire.ListenConfig{Token: token, Conn: wire.Options{Log: t.Logf}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv(run.TokenEnv, "")
	code, _, stderr := rewind(t, "worker", "--coordinator", l.Addr(), "--id", "0")
	if code != exitFailure || !strings.Contains(stderr, run.TokenEnv) {
		t.Errorf("no token: exit %d, stderr %q; want exit 1 naming $%s", code, stderr, run.TokenEnv)
	}
	t.Setenv(run.TokenEnv, strings.Repeat("0", len(token)))
	code, _, stderr = rewind(t, "worker", "--coordinator", l.Addr(), "--id", "0")
	if code != exitFailure || !strings.Contains(stderr, "wrong token") {
		t.Errorf("wrong token: exit %d, stderr %q; want exit 1 and the refusal", code, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if c, h, err := l.Accept(ctx); err == nil {
		c.Close()
		t.Fatalf("a worker with a wrong token was accepted (hello %+v)", h)
	}
	code, _, stderr = rewind(t, "worker", "--id", "0")
	if code != exitUsage || !strings.Contains(stderr, "--coordinator") {
		t.Errorf("no --coordinator: exit %d, stderr %q; want exit 2", code, stderr)
	}
}
