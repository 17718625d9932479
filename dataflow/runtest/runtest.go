// Package runtest is test support for whole runs of an executor
// (microbatch, diskphase, recordwise): the conformance suite every executor
// runs (Conformance: seeded random crash schedules, the resumed-process
// bill, the recovery points of a listing), the suite's TestMain with a
// goroutine leak check, fresh directories on a RAM disk, generated inputs
// for a built-in job, the reference executor's answer for a run
// configuration (cached), a judge of a finished run's output against that
// answer, an independent duplicate counter, and the S3 location of a test.
//
// Only _test.go files import it. It imports no executor but the reference
// (through one run.Executor value, Reference), so every executor's tests
// can use it; what differs per executor (its settings, fail points, storage
// layout, protocol checks) is in the Subject it hands the suite, or stays
// in the executor's own tests.
package runtest

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is a test binary's TestMain: it parses the flags, runs the tests and,
// when they passed, fails the binary if goroutines are left behind: an
// executor that returns must have stopped everything it started.
func Main(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines leaked after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// FastDir returns a fresh directory for storage or output, removed when the
// test ends. Every Put and sink flush fsyncs, which costs milliseconds on a
// CI disk, so it is on a RAM disk (/dev/shm) when there is one, unless disk
// is set (an executor's -xx.disk flag). Crash semantics do not depend on the
// medium: a crash in these tests is the loss of memory, not of the machine.
// prefix names the directory (rewind-mb-, ...), so a leftover says whose it is.
func FastDir(t testing.TB, prefix string, disk bool) string {
	t.Helper()
	if !disk {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			if d, err := os.MkdirTemp("/dev/shm", prefix); err == nil {
				t.Cleanup(func() { _ = os.RemoveAll(d) })
				return d
			}
		}
	}
	return t.TempDir()
}
