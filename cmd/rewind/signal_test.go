package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalChildEnv makes TestMain run signalChild: main's signal handling
// in front of a command that never finishes what it owes, so the test can
// tell a second interrupt from the work ending on its own.
const signalChildEnv = "REWIND_TEST_SIGNAL_CHILD"

func signalChild() {
	ctx, cancel := context.WithCancel(context.Background())
	firstSignalStops(cancel, os.Stderr) // in place before "ready"
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("cancelled")
	select {} // "finishing the summary", for ever
}

func TestASecondInterruptQuitsAtOnce(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), signalChildEnv+"=1")
	stderr := &stderrWatch{idSeen: make(chan struct{})} // safe to read while written
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("child printed %q (%v), want %q; stderr: %s", lines.Text(), lines.Err(), want, stderr.String())
		}
	}
	expect("ready")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect("cancelled")
	// The first interrupt only cancelled: the child is still at work.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the first interrupt ended the process (%v); it should only stop the work", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The signal handler's message comes after the cancel; wait for it
	// before the second interrupt, which would otherwise race it.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "interrupt again quits at once"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no line saying a second interrupt quits; stderr: %q", stderr.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("after the second interrupt: %v, want death by SIGINT", err)
		}
		if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("after the second interrupt: %v, want death by SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second interrupt did not end the process")
	}
}
