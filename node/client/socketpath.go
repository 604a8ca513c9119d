package client

import (
	"fmt"
	"runtime"
)

// MaxSocketPath is the longest path a Unix socket may have here: the
// sun_path field of sockaddr_un holds 108 bytes on Linux and 104 on the
// BSDs and macOS, with the terminating NUL.
func MaxSocketPath() int {
	if runtime.GOOS == "linux" {
		return 107
	}
	return 103
}

// CheckSocketPath returns a clear error if path is too long to be a Unix
// socket (the system says only "invalid argument"), and nil otherwise.
// extra is how many bytes longer a path next to it must be (the daemon
// binds path+".new" first).
func CheckSocketPath(path string, extra int) error {
	if n := len(path) + extra; n > MaxSocketPath() {
		return fmt.Errorf("the socket path %s is too long for a Unix socket (%d bytes; at most %d here): use a home with a shorter path (--home or $WEFT_HOME)", path, n, MaxSocketPath())
	}
	return nil
}
