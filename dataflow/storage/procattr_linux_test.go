package storage_test

import (
	"os/exec"
	"syscall"
)

// setPdeathsig makes the kernel kill cmd if this test binary dies (a test
// timeout, a crash) so no versitygw is left running.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
