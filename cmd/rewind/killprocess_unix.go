//go:build unix

package main

import (
	"os"
	"syscall"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
)

// killProcess carries out --fail ...,kill=process: the process dies of
// SIGKILL at once, as if the machine lost power, so no deferred cleanup
// runs and the run record is not marked finished. A variable, as on
// systems without SIGKILL it is nil.
var killProcess = func(fault.Spec) {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for { // the signal is on its way; nothing else may run meanwhile
		time.Sleep(time.Hour)
	}
}
