package daemon

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// connCred returns the credentials of the process that connected c.
func connCred(c net.Conn) (peerCred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peerCred{}, fmt.Errorf("peer credentials: %T is not a Unix connection", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peerCred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return peerCred{}, fmt.Errorf("peer credentials: %w", serr)
	}
	return peerCred{pid: cred.Pid, uid: cred.Uid, gid: cred.Gid}, nil
}
