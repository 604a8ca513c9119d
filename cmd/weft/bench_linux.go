package main

import "syscall"

// benchProcAttr makes the kernel kill a bench daemon if weft bench dies
// without stopping it (SIGKILL cannot be caught).
func benchProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
