package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weftmesh/weft/node/client"
)

// Long-running commands (read --follow, inbox --follow, handle) outlive a
// daemon restart: when the daemon goes away they say so on stderr, wait
// for it to answer again, and carry on where they were.

// daemonPoll is how often a waiting command asks whether the daemon is back.
const daemonPoll = 500 * time.Millisecond

// daemonGone reports whether err means the daemon went away (stopped,
// restarted, crashed) rather than that it refused the request: an answer
// of the API is a refusal; anything else (a stream cut, no socket, a
// connection refused) is the daemon gone.
func daemonGone(err error) bool {
	var ae *client.Error
	return err != nil && !errors.As(err, &ae) && !errors.Is(err, context.Canceled) && !errors.Is(err, errDone)
}

// waitDaemon waits until the daemon answers again, saying on stderr that it
// waits (what is the command doing) and when the daemon is back.
func waitDaemon(ctx context.Context, e *env, cause error) error {
	fmt.Fprintf(e.stderr, "weft: the daemon went away (%s); waiting for it to come back\n", oneLine(cause.Error()))
	c := e.client()
	t := time.NewTicker(daemonPoll)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Node(qctx)
		cancel()
		if err == nil {
			fmt.Fprintln(e.stderr, "weft: the daemon is back; resuming")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// resuming runs once (a follow or a handler registration) again each time
// the daemon goes away and comes back, until it ends for another reason.
// The first run's failure to reach the daemon is returned as it is (no
// daemon to wait for).
func resuming(ctx context.Context, e *env, once func() error) error {
	for first := true; ; first = false {
		err := once()
		if !daemonGone(err) || ctx.Err() != nil || (first && errors.Is(err, client.ErrNotRunning)) {
			return err
		}
		if werr := waitDaemon(ctx, e, err); werr != nil {
			return werr
		}
	}
}
