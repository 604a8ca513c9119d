package daemon

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// errNoPeerCred means this system cannot tell who is on the other end of
// a Unix socket: the socket's file mode is then the only guard.
var errNoPeerCred = errors.New("peer credentials are not supported on this system")

// peerCred is who connected to the socket, as the kernel tells it.
type peerCred struct {
	pid      int32
	uid, gid uint32
}

// Bounds of answering a refused connection.
const (
	refuseWait     = time.Second // to read its request and write the answer
	maxRefusing    = 8           // refused connections answered at once; more are closed unanswered
	maxRefusedHead = 8 << 10     // bytes of a refused request read
)

// credListener admits to the API socket only the daemon's own user, root,
// and the members of a configured group, checked by the kernel's peer
// credentials (SO_PEERCRED), so that a loosened socket file mode (chmod
// 666) does not open the API to every local user. A refused connection
// gets a 403 answer (when it can be given cheaply) and is closed, and a
// line is logged.
type credListener struct {
	net.Listener
	uid   uint32 // the daemon's user
	group int    // gid of the configured group; -1: none
	log   *slog.Logger

	refusing chan struct{} // slots for answering refused connections

	mu         sync.Mutex
	lastLog    time.Time
	suppressed int // refusals not logged since lastLog
}

func newCredListener(ln net.Listener, group int, log *slog.Logger) *credListener {
	return &credListener{Listener: ln, uid: uint32(os.Geteuid()), group: group, log: log, refusing: make(chan struct{}, maxRefusing)}
}

// Accept returns the next connection of an admitted peer.
func (l *credListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := connCred(c)
		if errors.Is(err, errNoPeerCred) {
			return c, nil
		}
		if err == nil && l.admits(cred) {
			return c, nil
		}
		l.refuse(c, cred, err)
	}
}

// admits reports whether a peer may use the socket.
func (l *credListener) admits(p peerCred) bool {
	switch {
	case p.uid == l.uid, p.uid == 0:
		return true
	case l.group < 0:
		return false
	case p.gid == uint32(l.group):
		return true
	}
	return inGroup(p.uid, l.group)
}

// inGroup reports whether user uid is a member of group gid (as the
// system's group database lists it).
func inGroup(uid uint32, gid int) bool {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return false
	}
	gids, err := u.GroupIds()
	return err == nil && slices.Contains(gids, strconv.Itoa(gid))
}

// refuse logs a refused connection, answers it 403 if a slot is free, and
// closes it.
func (l *credListener) refuse(c net.Conn, p peerCred, err error) {
	l.logRefusal(p, err)
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseWait))
		// Read the request first, so that the client sees the answer as
		// the answer to it.
		http.ReadRequest(bufio.NewReader(io.LimitReader(c, maxRefusedHead)))
		msg := "this socket admits only the daemon's user, root and the group set by weft daemon --socket-group"
		if err == nil {
			msg = fmt.Sprintf("uid %d may not use this daemon: %s", p.uid, msg)
		}
		body, _ := json.Marshal(api.Error{Error: api.ErrorBody{Code: api.CodeForbidden, Message: msg}})
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n", len(body)+1, body)
	}()
}

// logRefusal logs a refusal, at most one a second with the count of those
// left out, so a flood of connections cannot flood the log.
func (l *credListener) logRefusal(p peerCred, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.lastLog) < time.Second {
		l.suppressed++
		return
	}
	args := []any{"uid", p.uid, "gid", p.gid, "pid", p.pid}
	if err != nil {
		args = []any{"err", err}
	}
	if l.suppressed > 0 {
		args = append(args, "not_logged_since", l.suppressed)
	}
	l.log.Warn("socket: connection refused: not the daemon's user, root or its socket group", args...)
	l.lastLog, l.suppressed = time.Now(), 0
}

// lookupGroup resolves a group name (or number) to its gid.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		var err2 error
		if g, err2 = user.LookupGroupId(name); err2 != nil {
			return 0, err
		}
	}
	return strconv.Atoi(g.Gid)
}
