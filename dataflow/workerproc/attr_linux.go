package workerproc

import "syscall"

// childAttr puts a worker in its own process group (a terminal's Ctrl-C
// reaches the coordinator, which decides) and has the kernel SIGKILL it
// when the coordinator dies, however it dies, so no worker outlives its
// run. (The kernel sends it when the forking OS thread exits; the Go
// runtime ends a thread only when a goroutine locked to it returns
// without unlocking, which rewind does not do. A worker that outlived its
// coordinator anyway finds its connection gone and exits.)
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
