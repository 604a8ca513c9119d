package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// listenSocket binds the API socket at path: the socket file is made 0600
// inside a 0700 directory, and appears under its final name only once it is
// listening. With a group (gid ≥ 0) the socket is 0660 and the directory
// 0710, both of that group, so that its members can reach the socket (and
// nothing else in the directory). A live daemon already on path is an
// error; a stale socket file left by a crash is replaced.
func listenSocket(path string, gid int) (net.Listener, error) {
	dir := filepath.Dir(path)
	dirMode, sockMode := os.FileMode(0o700), os.FileMode(0o600)
	if gid >= 0 {
		dirMode, sockMode = 0o710, 0o660
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if err := setMode(dir, dirMode, gid); err != nil {
		return nil, fmt.Errorf("socket dir: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another daemon is already serving %s", path)
	}
	tmp := path + ".new"
	_ = os.Remove(tmp)
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", tmp, err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	if err := setMode(tmp, sockMode, gid); err != nil {
		ln.Close()
		return nil, fmt.Errorf("socket mode: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("publish socket: %w", err)
	}
	return &socketListener{Listener: ln, path: path}, nil
}

// setMode gives path mode and, if gid ≥ 0, that group.
func setMode(path string, mode os.FileMode, gid int) error {
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			return err
		}
	}
	return os.Chmod(path, mode)
}

// socketListener removes the socket file when closed.
type socketListener struct {
	net.Listener
	path string
}

func (l *socketListener) Close() error {
	err := l.Listener.Close()
	if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
		err = rerr
	}
	return err
}
