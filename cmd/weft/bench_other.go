//go:build !linux

package main

import "syscall"

// benchProcAttr: only Linux can tie a child's life to its parent's.
func benchProcAttr() *syscall.SysProcAttr { return nil }
