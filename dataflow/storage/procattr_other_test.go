//go:build !linux

package storage_test

import "os/exec"

func setPdeathsig(cmd *exec.Cmd) {}
