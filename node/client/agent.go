package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/weftmesh/weft/protocol/api"
)

// Card returns this node's agent card.
func (c *Client) Card(ctx context.Context) (api.Card, error) {
	var out api.Card
	err := c.do(ctx, http.MethodGet, "/v1/card", nil, &out)
	return out, err
}

// SetCard changes this node's name, description and static capabilities
// (the fields set in u; handlers add their own capabilities) and returns
// the whole card.
func (c *Client) SetCard(ctx context.Context, card api.CardUpdate) (api.Card, error) {
	var out api.Card
	err := c.do(ctx, http.MethodPut, "/v1/card", card, &out)
	return out, err
}

// PeerCard fetches a peer's agent card.
func (c *Client) PeerCard(ctx context.Context, peer string) (api.Card, error) {
	var out api.Card
	err := c.do(ctx, http.MethodGet, "/v1/peers/"+url.PathEscape(peer)+"/card", nil, &out)
	return out, err
}

// Health asks a peer for its heartbeat: status, load and round-trip time.
func (c *Client) Health(ctx context.Context, peer string) (api.Health, error) {
	var out api.Health
	err := c.do(ctx, http.MethodGet, "/v1/peers/"+url.PathEscape(peer)+"/health", nil, &out)
	return out, err
}

// Discover finds the peers that offer capability, with their cards, in the
// DHT and among connected (LAN) peers. wait bounds the search (0: the
// daemon's default, 10s).
func (c *Client) Discover(ctx context.Context, capability string, limit int, wait time.Duration) ([]api.Provider, error) {
	q := url.Values{"capability": {capability}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("timeout", wait.String())
	}
	var out api.Discovery
	err := c.do(ctx, http.MethodGet, "/v1/discover?"+q.Encode(), nil, &out)
	return out.Providers, err
}
