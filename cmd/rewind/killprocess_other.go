//go:build !unix

package main

import "github.com/rewind-engine/rewind/dataflow/fault"

// killProcess is nil where a process cannot SIGKILL itself: --fail
// ...,kill=process is refused there.
var killProcess func(fault.Spec)
