//go:build !unix

package daemon

// fdLimit reports no limit: this system has no RLIMIT_NOFILE.
func fdLimit() (uint64, bool) { return 0, false }
