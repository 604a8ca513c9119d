//go:build unix

package main

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup makes cmd the leader of a process group of its own, so that
// killGroup stops what it started too.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup stops a handler's process group: SIGTERM now, SIGKILL to
// whatever is left two seconds later.
func killGroup(pid int) {
	syscall.Kill(-pid, syscall.SIGTERM)
	time.AfterFunc(2*time.Second, func() { syscall.Kill(-pid, syscall.SIGKILL) })
}
