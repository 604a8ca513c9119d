package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/weftmesh/weft/protocol/api"
)

// DM sends a direct message. The daemon keeps it in its durable outbox
// until the recipient acknowledges it or its deadline passes; Status says
// whether that already happened ("delivered") or not ("queued").
func (c *Client) DM(ctx context.Context, req api.DMRequest) (api.DMResult, error) {
	var out api.DMResult
	err := c.do(ctx, http.MethodPost, "/v1/dm", req, &out)
	return out, err
}

// Inbox returns a page of the direct messages received, after cursor.
func (c *Client) Inbox(ctx context.Context, after string, limit int) (api.Page, error) {
	var out api.Page
	err := c.do(ctx, http.MethodGet, "/v1/inbox"+pageQuery(after, limit), nil, &out)
	return out, err
}

// Outbox returns the direct messages waiting for delivery (to one peer,
// or all when to is "").
func (c *Client) Outbox(ctx context.Context, to string) ([]api.Outgoing, error) {
	var out api.Outbox
	q := ""
	if to != "" {
		q = "?to=" + url.QueryEscape(to)
	}
	err := c.do(ctx, http.MethodGet, "/v1/outbox"+q, nil, &out)
	return out.Messages, err
}

// DeadLetters returns a page of the direct messages that could not be
// delivered before their deadline or were refused, with the reason.
func (c *Client) DeadLetters(ctx context.Context, after string, limit int) (api.Outbox, error) {
	var out api.Outbox
	err := c.do(ctx, http.MethodGet, "/v1/deadletters"+pageQuery(after, limit), nil, &out)
	return out, err
}

// Sent returns a page of the direct messages that were delivered, oldest
// first: the daemon keeps the last 1,000 delivered within 7 days.
func (c *Client) Sent(ctx context.Context, after string, limit int) (api.Outbox, error) {
	var out api.Outbox
	err := c.do(ctx, http.MethodGet, "/v1/sent"+pageQuery(after, limit), nil, &out)
	return out, err
}

// CancelOutgoing gives up a direct message waiting in the outbox (it
// becomes a dead letter with reason "cancelled").
func (c *Client) CancelOutgoing(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/outbox/"+url.PathEscape(id), nil, nil)
}

// DeleteDeadLetter removes a dead letter.
func (c *Client) DeleteDeadLetter(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/deadletters/"+url.PathEscape(id), nil, nil)
}

// pageQuery builds ?after=&limit=.
func pageQuery(after string, limit int) string {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// DMIACP sends an IACP 1.x JSON envelope as a direct message to its
// recipient (a peer ID); its message_id is kept as meta "iacp.id".
func (c *Client) DMIACP(ctx context.Context, envelope []byte) (api.DMResult, error) {
	resp, err := c.sendBody(ctx, http.MethodPost, "/v1/dm/iacp", bytes.NewReader(envelope),
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return api.DMResult{}, err
	}
	defer resp.Body.Close()
	var out api.DMResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return out, fmt.Errorf("decode answer: %w", err)
	}
	return out, nil
}

// MessageIACP returns a direct message as an IACP 1.x JSON envelope.
func (c *Client) MessageIACP(ctx context.Context, id string) ([]byte, error) {
	var out json.RawMessage
	err := c.do(ctx, http.MethodGet, "/v1/messages/"+url.PathEscape(id)+"/iacp", nil, &out)
	return out, err
}
