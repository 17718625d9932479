package main

import (
	"runtime/debug"
)

// applyMemoryLimit sets --memory-limit as the Go runtime's soft memory
// limit (what GOMEMLIMIT sets): the collector runs more often as the
// process's Go memory nears it and returns freed memory to the system
// sooner. It is soft: a run whose state and buffers need more goes on past
// it rather than fail (the collector then takes at most about half the
// CPU), so it trims the slack the collector leaves, not what the run
// holds; docs/memory.md lists that. "" leaves the runtime's setting
// (GOMEMLIMIT, or none).
func applyMemoryLimit(v string) error {
	if v == "" {
		return nil
	}
	b, err := parseSize("--memory-limit", v)
	if err != nil {
		return err
	}
	debug.SetMemoryLimit(b)
	return nil
}
