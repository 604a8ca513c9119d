package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/weftmesh/weft/protocol/api"
)

// maxEventSize bounds one SSE line; a message is at most 1 MiB of body, and
// its JSON view (content plus base64 signature) stays well under this.
const maxEventSize = 4 << 20

// Follow streams a space's messages after cursor ("" = from the start):
// first everything stored, then new messages as they arrive. It calls fn
// for each message in order and returns when ctx ends (ctx.Err()), when fn
// returns an error (that error), or when the stream fails. Pass the last
// message's Cursor to resume without loss.
func (c *Client) Follow(ctx context.Context, space, after string, fn func(api.Message) error) error {
	return c.follow(ctx, "/v1/spaces/"+url.PathEscape(space)+"/events", after, fn)
}

// FollowInbox streams the direct messages in this node's inbox after
// cursor, like Follow.
func (c *Client) FollowInbox(ctx context.Context, after string, fn func(api.Message) error) error {
	return c.follow(ctx, "/v1/inbox/events", after, fn)
}

func (c *Client) follow(ctx context.Context, path, after string, fn func(api.Message) error) error {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if after != "" {
		hdr.Set("Last-Event-ID", after)
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil, hdr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventSize)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				var m api.Message
				if err := json.Unmarshal([]byte(data), &m); err != nil {
					return fmt.Errorf("decode event %s: %w", id, err)
				}
				if m.Cursor == "" {
					m.Cursor = id
				}
				if err := fn(m); err != nil {
					return err
				}
			}
			id, data = "", ""
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data += strings.TrimPrefix(line[5:], " ")
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	return fmt.Errorf("event stream closed by the daemon")
}
