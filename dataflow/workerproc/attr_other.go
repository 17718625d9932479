//go:build !linux

package workerproc

import "syscall"

// childAttr puts a worker in its own process group. Without Linux's
// parent-death signal, a worker whose coordinator died exits when it finds
// its connection gone.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
