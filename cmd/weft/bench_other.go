//go:build !linux

package main

import (
	"os"
	"syscall"
)

// benchProcAttr: only Linux can tie a child's life to its parent's.
func benchProcAttr() *syscall.SysProcAttr { return nil }

// fdatasync is f.Sync where there is no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }
