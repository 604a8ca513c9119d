package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// DefaultMaxConns is how many connections the API socket serves at once
// unless configured otherwise; more wait to be accepted. An agent holds a
// few at a time (an event stream per space it follows, its handler
// registration, its calls in flight, an MCP session), so 2048 serves
// hundreds of agents on one daemon. The connections of the earlier
// unbounded socket ran the process out of file descriptors (about 21,000
// slow requests); Go raises the soft descriptor limit to the hard one
// (commonly 2^19 or 2^20), and the cap is lowered to a quarter of the
// limit where it is smaller, so libp2p and Badger always keep theirs.
const DefaultMaxConns = 2048

// Timeouts of the API's HTTP servers. Request bodies are bounded by
// Config.BodyTimeout (localapi.BoundBodies).
const (
	headerTimeout = 10 * time.Second
	idleTimeout   = 2 * time.Minute
)

// newServer returns an HTTP server of h whose requests' contexts end when
// ctx does.
func (d *Daemon) newServer(ctx context.Context, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
}

// limitConns caps the connections ln serves at once at the configured
// number, within a quarter of the process's file descriptor limit: Accept
// waits for a connection to close, and the connections beyond wait in the
// listener's backlog.
func (d *Daemon) limitConns(ln net.Listener) net.Listener {
	n := d.cfg.maxConns()
	if cur, ok := fdLimit(); ok && cur/4 < uint64(n) {
		d.log.Warn("api: fewer connections than configured, for lack of file descriptors (raise ulimit -n)",
			"max_conns", n, "fd_limit", cur, "using", max(cur/4, 1))
		n = int(max(cur/4, 1))
	}
	return netutil.LimitListener(ln, n)
}
