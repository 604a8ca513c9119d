//go:build unix

package daemon

import "syscall"

// fdLimit returns the process's soft limit of open files.
func fdLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true
}
