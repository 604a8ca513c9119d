//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// ownGroup does nothing here: there are no process groups to signal.
func ownGroup(*exec.Cmd) {}

// killGroup kills the handler's process (not what it started: no process
// groups here).
func killGroup(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
