package mcp

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftmesh/weft/node/client"
	"github.com/weftmesh/weft/protocol/api"
)

// hints tell a model what to do about an API error, by its code.
var hints = map[string]string{
	api.CodeUnknownSpace:  "this node has not joined that space: call join with its name first",
	api.CodeBadCursor:     "pass a cursor exactly as a previous read, inbox or wait returned it in \"next\", or leave it out",
	api.CodeBadPeer:       "a peer ID looks like 12D3KooW…; whoami shows yours, discover finds others by capability",
	api.CodeNoHandler:     "that peer serves no handler by that name: discover a capability to see who offers what",
	api.CodeUnreachable:   "the peer is offline or cannot be reached now: retry later, or send a dm, which is queued and delivered when it is back",
	api.CodeConnectFailed: "the peer is offline or cannot be reached now: retry later",
	api.CodeDeadline:      "the handler did not answer in time: retry with a larger timeout_seconds",
	api.CodeOverloaded:    "the peer is busy: retry in a few seconds",
	api.CodeHandlerFailed: "the remote handler failed; its message says why",
	api.CodeTooLarge:      "the content is too large: send less (a message is at most 1 MiB)",
	api.CodeInvalid:       "the daemon refused the arguments as given; the message says which",
	api.CodeUnavailable:   "the daemon could not do it right now: retry shortly",
}

// explain turns an error of the local API into one a model can act on.
func explain(err error) error {
	var e *client.Error
	switch {
	case errors.Is(err, client.ErrNotRunning):
		return fmt.Errorf("%v: the weft daemon is not running on this machine; start it with `weft daemon` (in the background) and retry", err)
	case errors.As(err, &e):
		if h, ok := hints[e.Code]; ok {
			return fmt.Errorf("%s [%s]: %s", e.Message, e.Code, h)
		}
		return fmt.Errorf("%s [%s]", e.Message, e.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("timed out: %v", err)
	}
	return err
}
