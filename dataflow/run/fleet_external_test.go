package run_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// externalWorker joins as worker id the way `rewind worker` does and says
// ready; killed is closed when the coordinator asks it to die, and its
// connection then breaks as a killed process's would.
func externalWorker(t *testing.T, addr string, id int) (c *wire.Conn, killed chan struct{}, err error) {
	killed = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The fleet may not be listening yet.
	c, _, err = run.JoinCoordinatorRetrying(ctx, addr, id, wire.Options{Log: t.Logf, OnKill: func() { close(killed) }}, 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, killed, run.SendReady(c)
}

// With WorkerCommand.External the fleet starts nothing: it waits for the
// workers to join with the token, refuses a second incarnation of a worker
// whose connection is open, kills one by asking it to, and after that
// waits for the replacement somebody else starts, billing that wait as the
// acquire.
func TestAnExternalFleetWaitsForItsWorkersAndTheirReplacements(t *testing.T) {
	token, err := wire.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(run.TokenEnv, token)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer func() {
		if left := alloc.CurrentAlloc(); left != 0 {
			t.Errorf("%d bytes of Arrow memory outstanding", left)
		}
	}()
	type started struct {
		f   *run.Fleet
		err error
	}
	fleetc := make(chan started, 1)
	go func() {
		f, err := run.StartFleet(context.Background(), run.FleetConfig{Executor: "fleet-test", Config: []byte(`{"k":1}`), N: 2,
			Command: &run.WorkerCommand{External: true, Listen: addr, Token: token}, Alloc: alloc, Log: t.Logf})
		fleetc <- started{f, err}
	}()
	var killed1 chan struct{}
	for id := range 2 {
		_, k, err := externalWorker(t, addr, id)
		if err != nil {
			t.Fatalf("worker %d: %v", id, err)
		}
		killed1 = k
	}
	st := <-fleetc
	if st.err != nil {
		t.Fatal(st.err)
	}
	f := st.f
	defer f.Close()
	if _, _, err := externalWorker(t, addr, 0); err == nil || !strings.Contains(err.Error(), "worker 0 is in this run already") {
		t.Fatalf("a second worker 0 while the first is connected: %v; want it refused", err)
	}
	killedAt, detected, err := f.Kill(1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-killed1:
	default:
		t.Fatal("Kill returned, but worker 1 was never asked to die")
	}
	if detected.Before(killedAt) {
		t.Fatalf("detected at %v, before the kill at %v", detected, killedAt)
	}
	const restart = 150 * time.Millisecond // the scheduler's restart delay
	go func() {
		time.Sleep(restart)
		if _, _, err := externalWorker(t, addr, 1); err != nil {
			t.Errorf("worker 1's replacement: %v", err)
		}
	}()
	acquire, err := f.Replace(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if acquire < restart {
		t.Fatalf("acquire %v, shorter than the %v the replacement took to be started", acquire, restart)
	}
	if n := f.Started(); n != 3 {
		t.Fatalf("Started %d, want 3 (two workers and one replacement)", n)
	}
	if c := f.Slot(1).Conn; c.Err() != nil {
		t.Fatalf("the replacement's connection: %v", c.Err())
	}
}
