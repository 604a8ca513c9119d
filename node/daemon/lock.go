package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// lockName is the file in the home that the running daemon holds locked
// and writes its process ID into.
const lockName = "daemon.lock"

// errLocked is what tryLock returns when another process holds the lock.
var errLocked = errors.New("locked")

// homeLock is the running daemon's hold on its home: one daemon per home.
type homeLock struct{ f *os.File }

// lockHome takes the home's lock, or says which daemon holds it. The lock
// is the operating system's (released when the process ends, however it
// ends), so a crashed daemon never leaves it behind.
func lockHome(home string) (*homeLock, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("home: %w", err)
	}
	path := filepath.Join(home, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("home lock: %w", err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("a weft daemon already runs with home %s (%s); stop it first, or give this one another --home", home, holder(path))
		}
		return nil, fmt.Errorf("home lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &homeLock{f}, nil
}

// holder says who holds the lock at path, from the process ID in it.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "pid unknown"
	}
	pid := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(pid); err != nil {
		return "pid unknown"
	}
	return "pid " + pid
}

// release unlocks the home.
func (l *homeLock) release() {
	if l != nil && l.f != nil {
		_ = l.f.Close() // closing the file releases the lock
	}
}
