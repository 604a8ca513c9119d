//go:build unix

package mesh

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkKeyOwner refuses a key file that another user owns: whoever owns
// it could have planted it, and can replace it.
func checkKeyOwner(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); int(sys.Uid) != me {
		return fmt.Errorf("identity: key file %s is owned by uid %d, not by this daemon's user (uid %d): another user could have planted it; if the key is yours, fix with: chown %d %s; otherwise move it away to make a new identity",
			path, sys.Uid, me, me, path)
	}
	return nil
}

// checkKeyDir refuses a directory for the key that other users may write
// and that is not ours: anyone could plant a key in it, or swap ours.
func checkKeyDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	me := os.Geteuid()
	if perm := st.Mode().Perm(); perm&0o022 != 0 && int(sys.Uid) != me {
		return fmt.Errorf("identity: directory %s has mode %04o and is owned by uid %d, not by this daemon's user (uid %d): other users could plant a key in it; use a home of your own (--home or WEFT_HOME), or fix with: chown %d %s && chmod 700 %s",
			dir, perm, sys.Uid, me, me, dir, dir)
	}
	return nil
}
