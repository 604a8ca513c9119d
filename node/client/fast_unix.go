//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// fastPath: sends take the fast path (fast.go).
const fastPath = true

// alive reports whether an idle connection to the daemon is still open:
// a non-blocking peek finds nothing to read (the daemon's close would be
// an end of file, and it sends nothing unasked).
func alive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, perr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errors.Is(perr, syscall.EAGAIN)
		return true // never wait
	})
	return err == nil && open
}
