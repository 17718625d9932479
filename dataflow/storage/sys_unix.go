//go:build unix

package storage

import (
	"errors"
	"syscall"
)

// processAlive reports whether pid names a running process on this host.
// EPERM means it exists but belongs to someone else.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// isNotDir reports a path whose parent component is a file: for an object
// store that is just a missing object.
func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
