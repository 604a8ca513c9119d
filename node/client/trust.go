package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/weftmesh/weft/protocol/api"
)

// Trust puts peer on the daemon's trust list under name (trusting a peer
// again replaces its name). Trusted peers may call the handlers that allow
// "trusted" (the default) and write to the inbox without the strangers'
// rate and quota.
func (c *Client) Trust(ctx context.Context, peer, name string) (api.TrustedPeer, error) {
	var out api.TrustedPeer
	err := c.do(ctx, http.MethodPost, "/v1/trust", api.TrustRequest{Peer: peer, Name: name}, &out)
	return out, err
}

// Untrust takes peer off the trust list and reports whether it was on it.
func (c *Client) Untrust(ctx context.Context, peer string) (bool, error) {
	var out api.Untrusted
	err := c.do(ctx, http.MethodDelete, "/v1/trust/"+url.PathEscape(peer), nil, &out)
	return out.Removed, err
}

// Trusted returns the trust list and the inbox's DM policy.
func (c *Client) Trusted(ctx context.Context) (api.TrustList, error) {
	var out api.TrustList
	err := c.do(ctx, http.MethodGet, "/v1/trust", nil, &out)
	return out, err
}
