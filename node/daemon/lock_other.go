//go:build !unix

package daemon

import "os"

// tryLock does nothing here: the store's own lock keeps a second daemon
// out, with a less helpful message.
func tryLock(*os.File) error { return nil }
