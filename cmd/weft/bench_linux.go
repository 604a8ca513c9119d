package main

import (
	"os"
	"syscall"
)

// benchProcAttr makes the kernel kill a bench daemon if weft bench dies
// without stopping it (SIGKILL cannot be caught).
func benchProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// fdatasync writes f's data to disk, not its metadata (a write-ahead log's
// sync, when the file does not grow).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
